"""by_identity: a result is reused only for the very objects it was computed from, never for equal ones or for a
new object that happens to take a freed one's id (the arguments are held while their result is kept)."""
from gpudiag.identity_memo import by_identity


def test_a_result_is_reused_for_the_same_objects_only():
    calls = []

    @by_identity(2)
    def size(data, extra):
        calls.append(1)
        return len(data) + len(extra)

    a, b = {"x": 1}, {}
    assert size(a, b) == 1 and size(a, b) == 1 and len(calls) == 1
    assert size({"x": 1}, b) == 1 and len(calls) == 2  # equal, not the same: computed again
    size({}, {}), size([], [])  # two more: the first ones are pushed out (two kept)
    assert size(a, b) == 1 and len(calls) == 5


def test_an_id_freed_and_taken_again_is_never_read_as_the_old_object():
    @by_identity(1)
    def first_key(data):
        return next(iter(data))

    for n in range(200):  # dicts made and dropped in a loop reuse ids; the memo holds its argument, so none can
        data = {f"k{n}": n}
        assert first_key(data) == f"k{n}"
        del data
