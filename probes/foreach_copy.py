"""The grouped copy as sglang's `_grouped_foreach_copy_` does it: the pairs grouped by (dst dtype, src dtype)
on every call, one torch._foreach_copy_ per group. The one implementation, shared by the copy benchmark (its
`grouped_foreach` strategy and the splits) and the synthetic graph harness (its replay's input copy); a
module of its own so the cuda_graph payload carries these lines and not the whole copy benchmark.
torch is imported inside the functions, at call time.
"""


def group_by_dtype_pair(dsts, srcs):
    """{(dst dtype, src dtype): ([dsts], [srcs])} in first-seen order: one foreach call per pair."""
    groups = {}
    for dst, src in zip(dsts, srcs):
        pair = groups.setdefault((dst.dtype, src.dtype), ([], []))
        pair[0].append(dst)
        pair[1].append(src)
    return groups


def loop_copy(dsts, srcs):
    for dst, src in zip(dsts, srcs):
        dst.copy_(src)


def grouped_foreach_copy(dsts, srcs):
    """One torch._foreach_copy_ per (dst dtype, src dtype) pair; a loop where torch has no foreach copy."""
    import torch
    foreach = getattr(torch, "_foreach_copy_", None)
    for group_dsts, group_srcs in group_by_dtype_pair(dsts, srcs).values():
        if foreach is not None:
            foreach(group_dsts, group_srcs)
        else:
            loop_copy(group_dsts, group_srcs)
