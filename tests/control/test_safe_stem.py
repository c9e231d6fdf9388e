"""Chart files are named by host: names that read alike once made safe for a file name still get files of their own."""
from gpudiag.probe_view import safe_stem


def test_each_host_name_gets_its_own_file_stem():
    names = ["gpu-a", "a b", "a_b", "a/b", ".hidden", "", "gpu-01.lab"]
    stems = [safe_stem(n) for n in names]
    assert len(set(stems)) == len(names)
    assert stems[0] == "gpu-a" and stems[6] == "gpu-01.lab"  # safe names are kept as they are
    assert all(s and not s.startswith(".") and "/" not in s and " " not in s for s in stems)
    assert safe_stem("a b") == safe_stem("a b")  # the same name, the same file
