"""Ways to copy a replay's input tensors into static buffers, and the check that a way copied right.

Each strategy copies a list of sources into destinations. Grouping by dtype pair is redone on every call,
as sglang does on every replay step (probes/foreach_copy.py, shared with the synthetic graph harness); the
splits and the packed layout are fixed from the static buffers.
"""
import importlib
import importlib.util
import sys

from probes import replay_fields
from probes.foreach_copy import grouped_foreach_copy, loop_copy

# Each strategy's name, spelled here only: the probe's results, the options, the findings and the report's
# tables and charts all read these constants and the declaration below.
LOOP, GROUPED, NAMED_SPLIT, SIZE_SPLIT, PACKED, INSTALLED = (
    "loop", "grouped_foreach", "grouped_foreach_dma_split", "grouped_foreach_size_split", "packed", "installed")
# Each strategy declared once, in the order they are measured: `usable` when sglang itself can run it (only those
# are ever a saving's target), `drawn` when the report's charts plot it, `caveat` beside its name in tables.
# NAMED_SPLIT is sglang's own split (PR #28465): the fields the release copies on their own copy_(),
# hidden_states above all, leave the group by name at every size. SIZE_SPLIT is the variant that moves any
# memcpy-able field from a measured size on.
DECLARED = (
    {"name": LOOP, "usable": False, "drawn": True, "caveat": None},
    {"name": GROUPED, "usable": True, "drawn": True, "caveat": None},
    {"name": NAMED_SPLIT, "usable": True, "drawn": True, "caveat": None},
    {"name": SIZE_SPLIT, "usable": False, "drawn": False, "caveat": "no release ships it"},
    {"name": PACKED, "usable": False, "drawn": False, "caveat": "sglang cannot use it"},
    {"name": INSTALLED, "usable": True, "drawn": True, "caveat": None},
)
STRATEGIES = tuple(str(s["name"]) for s in DECLARED)   # measured in this order
# Shown with the installed copy first: the baseline every other strategy is compared to.
SHOWN = (INSTALLED,) + tuple(n for n in STRATEGIES if n != INSTALLED)
USABLE = tuple(str(s["name"]) for s in DECLARED if s["usable"])
DRAWN = tuple(str(s["name"]) for s in DECLARED if s["drawn"])
CAVEATS = dict((str(s["name"]), str(s["caveat"])) for s in DECLARED if s["caveat"])
OWN_COPY_FIELDS = replay_fields.own_copy_names()
INSTALLED_NAME = "_grouped_foreach_copy_"
# Where sglang releases define _grouped_foreach_copy_, for when the sglang_source probe did not run:
# 0.5.14+ runner_utils.buffers (re-exported by the runner package, which the EAGLE runners import) and
# cuda_graph_buffer_registry (the buffer registry's fill); up to 0.5.11 cuda_graph_runner. The last two
# names are kept for releases in between; a module that is missing costs one failed import.
FALLBACK_MODULES = ("sglang.srt.model_executor.runner_utils.buffers",
                    "sglang.srt.model_executor.cuda_graph_buffer_registry",
                    "sglang.srt.model_executor.runner", "sglang.srt.model_executor.cuda_graph_runner",
                    "sglang.srt.model_executor.input_buffers", "sglang.srt.model_executor.graph_input_buffers")
# Environment switches a release's definition reads on every call; each is timed on and off.
# 0.5.23 cuda_graph_buffer_registry: one foreach launch for a single dense integer dtype pair (CUDA only).
ENV_GATES = ("SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH",)
PACKED_CAVEAT = ("packed needs the static buffers to be views of one arena (sglang allocates each buffer "
                 "on its own), and it stages every field through one extra kernel before the copy")


def copy_goes_to_dma(dst, src):
    """copy_() of this pair is a plain memcpy (copy engine on CUDA): same dtype and device, both contiguous."""
    return (dst.dtype == src.dtype and dst.device == src.device and dst.is_contiguous()
            and src.is_contiguous())


class NamedSplitCopy(object):
    """sglang's split: the named fields each on their own copy_() (a memcpy on the copy engine when the pair
    allows it), every other field through the grouped foreach copy, whatever the sizes."""

    def __init__(self, names, dsts, own_copy=OWN_COPY_FIELDS):
        self.dsts = list(dsts)
        self.own = [i for i, name in enumerate(names) if name in own_copy]
        self.grouped = [i for i in range(len(self.dsts)) if i not in self.own]

    def __call__(self, srcs):
        grouped_foreach_copy([self.dsts[i] for i in self.grouped], [srcs[i] for i in self.grouped])
        for i in self.own:
            self.dsts[i].copy_(srcs[i])


def split_marks(names, sizes, threshold_bytes, own_copy=OWN_COPY_FIELDS):
    """Per field: {split: dma|foreach} for the named split, {size_split: dma|foreach} for the size split."""
    return [{"split": "dma" if name in own_copy else "foreach",
             "size_split": "dma" if threshold_bytes is not None and size >= threshold_bytes else "foreach"}
            for name, size in zip(names, sizes)]


def runners(names, dsts, srcs, threshold_bytes, packed_device=None):
    """(name, (fn, dsts the fn writes)) for the built-in strategies; packed only with a device for its arena."""
    named, sized = NamedSplitCopy(names, dsts), SplitCopy(dsts, threshold_bytes)
    yield LOOP, (lambda: loop_copy(dsts, srcs), dsts)
    yield GROUPED, (lambda: grouped_foreach_copy(dsts, srcs), dsts)
    yield NAMED_SPLIT, (lambda: named(srcs), dsts)
    yield SIZE_SPLIT, (lambda: sized(srcs), dsts)
    if packed_device is not None:
        packed = PackedCopy(dsts, packed_device)
        yield PACKED, (lambda: packed(srcs), packed.dsts)


class SplitCopy(object):
    """The size variant: grouped foreach for small tensors, a plain copy_() (DMA) for large contiguous ones.

    Which fields are large is decided once from the static destinations, as a caller would hard-code
    it; on each call a large pair that turns out not to be memcpy-able (a cast) rejoins the group.
    """

    def __init__(self, dsts, threshold_bytes):
        self.dsts = list(dsts)
        self.large = [i for i, d in enumerate(self.dsts) if threshold_bytes is not None and d.is_contiguous()
                      and d.numel() * d.element_size() >= threshold_bytes]
        self.small = [i for i in range(len(self.dsts)) if i not in self.large]

    def __call__(self, srcs):
        small_d = [self.dsts[i] for i in self.small]
        small_s = [srcs[i] for i in self.small]
        for i in self.large:
            if copy_goes_to_dma(self.dsts[i], srcs[i]):
                self.dsts[i].copy_(srcs[i])
            else:
                small_d.append(self.dsts[i])
                small_s.append(srcs[i])
        grouped_foreach_copy(small_d, small_s)


class PackedCopy(object):
    """Stage every source into one contiguous byte buffer, copy it once, and read the fields as views.

    The destinations are views of one arena, laid out by falling element size so every view is aligned.
    Non-contiguous sources are flattened (a copy) and a cast pair is cast while staging.
    """

    def __init__(self, like_dsts, device):
        import torch
        order = sorted(range(len(like_dsts)), key=lambda i: -like_dsts[i].element_size())
        offsets, total = [0] * len(like_dsts), 0
        for i in order:
            offsets[i] = total
            total += like_dsts[i].numel() * like_dsts[i].element_size()
        self.order = order
        self.arena = torch.empty(max(total, 1), dtype=torch.uint8, device=device)
        self.staging = torch.empty_like(self.arena)
        self.total = total
        self.dsts = []
        for i, like in enumerate(like_dsts):
            nbytes = like.numel() * like.element_size()
            flat = self.arena[offsets[i]:offsets[i] + nbytes].view(like.dtype)
            self.dsts.append(flat.view(like.shape))

    def __call__(self, srcs):
        import torch
        pieces = []
        for i in self.order:
            src, dst = srcs[i], self.dsts[i]
            if src.dtype != dst.dtype:
                src = src.to(dst.dtype)
            pieces.append(src.contiguous().view(-1).view(torch.uint8))
        torch.cat(pieces, out=self.staging[:self.total])
        self.arena[:self.total].copy_(self.staging[:self.total])


class InstalledCopy(object):
    """The installed release's own function: small fields through it, hidden_states as the release does."""

    def __init__(self, fn, dsts, separate_index=None):
        self.fn = fn
        self.dsts = list(dsts)
        self.separate_index = separate_index

    def __call__(self, srcs):
        if self.separate_index is None:
            self.fn(self.dsts, list(srcs))
            return
        keep = [i for i in range(len(self.dsts)) if i != self.separate_index]
        self.fn([self.dsts[i] for i in keep], [srcs[i] for i in keep])
        self.dsts[self.separate_index].copy_(srcs[self.separate_index])


def verify(names, dsts, srcs):
    """None when every destination equals its source (cast as copy_ casts), else what differs, in words."""
    import torch
    for name, dst, src in zip(names, dsts, srcs):
        expected = src.to(dst.dtype) if src.dtype != dst.dtype else src
        if tuple(dst.shape) != tuple(expected.shape):
            return "field %s: shape %s, expected %s" % (name, list(dst.shape), list(expected.shape))
        if not torch.equal(dst, expected):
            differ = int((dst != expected).sum().item())
            return "field %s: %d of %d elements differ from the source" % (name, differ, dst.numel())
    return None


def sources_changed(names, srcs, refs):
    """None when every source still equals the copy saved before the strategy ran, else which one changed:
    a strategy that writes into its sources (a copy the wrong way round) is wrong whatever it left behind."""
    import torch
    for name, src, ref in zip(names, srcs, refs):
        if not torch.equal(src, ref):
            differ = int((src != ref).sum().item())
            return "field %s: the strategy changed its source (%d of %d elements)" % (name, differ, src.numel())
    return None


def env_gates(module):
    """The ENV_GATES a module's source mentions (read from its file; none when it has no readable file)."""
    try:
        with open(getattr(module, "__file__", None) or "", "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
    except (OSError, TypeError):
        return []
    return [name for name in ENV_GATES if name in text]


def load_installed(modules):
    """([{module, fn}], [{module, reason}]): every `_grouped_foreach_copy_` the installed sglang defines.

    Imports sglang modules, so only the deep probe calls it. Nothing is imported when sglang is absent.
    """
    try:
        present = importlib.util.find_spec("sglang") is not None
    except (ImportError, ValueError):
        present = False
    if not present:
        return [], [{"module": "sglang", "reason": "sglang is not importable by %s" % sys.executable}]
    loaded, failed = [], []
    for module in modules or FALLBACK_MODULES:
        try:
            mod = importlib.import_module(module)
        except BaseException as exc:  # an odd release can raise anything on import, SystemExit included
            if modules:
                failed.append({"module": module, "reason": "import failed: %s: %s"
                               % (type(exc).__name__, str(exc)[:200])})
            continue
        fn = getattr(mod, INSTALLED_NAME, None)
        if callable(fn) and any(item["fn"] is fn for item in loaded):
            continue   # a re-export of a definition already loaded (the runner package's)
        if callable(fn):
            loaded.append({"module": module, "fn": fn, "env_gates": env_gates(mod)})
        elif modules:
            failed.append({"module": module, "reason": "%s defines no %s" % (module, INSTALLED_NAME)})
    if not loaded and not failed:
        failed.append({"module": "sglang", "reason": "no module of the installed sglang defines %s"
                       % INSTALLED_NAME})
    return loaded, failed
