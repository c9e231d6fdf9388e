"""Host-key checks: known_hosts lookup (plain, hashed, wildcard, [host]:port), changed and unknown keys
with their reasons, and --accept-new recording into gpudiag's own file from many threads at once."""
import threading

import paramiko
import pytest

from gpudiag.transports.hostkeys import HostKeyChecker, HostKeyError, fingerprint, host_id, own_known_hosts_path


@pytest.fixture(scope="module")
def keys():
    return [paramiko.ECDSAKey.generate() for _ in range(3)]


def line(name, key):
    return f"{name} {key.get_name()} {key.get_base64()}\n"


def checker(tmp_path, text="", accept_new=False, user_text=None):
    own = tmp_path / "own_known_hosts"
    own.write_text(text)
    user = tmp_path / "user_known_hosts"
    user.write_text(user_text or "")
    return HostKeyChecker(accept_new=accept_new, own_file=str(own), extra_files=[str(user)])


def test_host_id_uses_brackets_for_other_ports():
    assert host_id("gpu1", None) == "gpu1"
    assert host_id("gpu1", 22) == "gpu1"
    assert host_id("10.0.0.1", 2222) == "[10.0.0.1]:2222"


def test_known_key_passes_in_plain_hashed_and_wildcard_form(tmp_path, keys):
    hashed = paramiko.HostKeys.hash_host("[10.0.0.1]:2222")
    text = line("other", keys[1]) + line(hashed, keys[0]) + line("*.gpu.example,!bad.gpu.example", keys[2])
    check = checker(tmp_path, user_text=text)
    check.check("[10.0.0.1]:2222", keys[0])
    check.check("n1.gpu.example", keys[2])
    with pytest.raises(HostKeyError) as caught:
        check.check("bad.gpu.example", keys[2])
    assert caught.value.status == "host_key_unknown"


def test_brackets_are_literal_not_a_character_class(tmp_path, keys):
    check = checker(tmp_path, line("[10.0.0.1]:2222", keys[0]))
    with pytest.raises(HostKeyError) as caught:
        check.check("1", keys[0])
    assert caught.value.status == "host_key_unknown"


def test_changed_key_names_both_fingerprints_and_file_line(tmp_path, keys):
    text = "# comment\n\n" + line("gpu1", keys[0])
    check = checker(tmp_path, text, accept_new=True)
    with pytest.raises(HostKeyError) as caught:
        check.check("gpu1", keys[1])
    assert caught.value.status == "host_key_changed"
    reason = caught.value.reason
    assert fingerprint(keys[0]) in reason and fingerprint(keys[1]) in reason
    assert f"{tmp_path / 'own_known_hosts'}:3" in reason
    assert (tmp_path / "own_known_hosts").read_text() == text     # never recorded, even with accept_new


def test_unknown_key_reason_and_accept_new(tmp_path, keys):
    with pytest.raises(HostKeyError) as caught:
        checker(tmp_path).check("[h]:2200", keys[0])
    assert caught.value.status == "host_key_unknown"
    assert fingerprint(keys[0]) in caught.value.reason and "--accept-new" in caught.value.reason
    assert fingerprint(keys[0]).startswith("SHA256:") and not fingerprint(keys[0]).endswith("=")

    accepting = checker(tmp_path, accept_new=True)
    accepting.check("[h]:2200", keys[0])
    assert (tmp_path / "own_known_hosts").read_text() == line("[h]:2200", keys[0])
    HostKeyChecker(own_file=str(tmp_path / "own_known_hosts"), extra_files=[]).check("[h]:2200", keys[0])


def test_concurrent_accept_new_writes_whole_lines_once(tmp_path, keys):
    own = tmp_path / "deep" / "dir" / "known_hosts"
    names = [f"[10.0.0.{i}]:22{i:02d}" for i in range(40)]

    def accept(name):
        HostKeyChecker(accept_new=True, own_file=str(own), extra_files=[]).check(name, keys[0])

    threads = [threading.Thread(target=accept, args=(n,)) for n in names + names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = own.read_text().splitlines()
    assert sorted(lines) == sorted(line(n, keys[0]).strip() for n in names)


def test_own_file_location_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("GPUDIAG_KNOWN_HOSTS", raising=False)
    assert own_known_hosts_path() == tmp_path / ".config" / "gpudiag" / "known_hosts"
    monkeypatch.setenv("GPUDIAG_KNOWN_HOSTS", str(tmp_path / "env"))
    assert own_known_hosts_path() == tmp_path / "env"
    assert own_known_hosts_path(str(tmp_path / "flag")) == tmp_path / "flag"


def test_broken_lines_are_warned_about_with_file_and_line_and_other_hosts_still_check(tmp_path, keys, capsys):
    text = ("garbage\n@revoked * ssh-rsa AAAA\nhost ssh-ed25519 not-base64!!\n@bogus gpu1 x y\n"
            "old 1024 35 12345\nhost sk-ssh-ed25519@openssh.com AAAA\n" + line("gpu1", keys[0]))
    checker(tmp_path, text).check("gpu1", keys[0])
    warned = capsys.readouterr().err
    own = tmp_path / "own_known_hosts"
    for number, why in [(1, "fewer fields"), (2, "the ssh-rsa key cannot be read"), (3, "the key is not valid base64"),
                        (4, "invalid marker '@bogus'"), (5, "SSH-1 RSA key"), (6, "not one gpudiag can check")]:
        said = [w for w in warned.splitlines() if w.startswith(f"gpudiag: warning: {own}:{number}: known_hosts line not read:")]
        assert len(said) == 1 and why in said[0], warned
    checker(tmp_path, text).check("gpu1", keys[0])
    assert capsys.readouterr().err == ""                           # once per file:line, not once per host


@pytest.mark.parametrize("spacing", ["  ", "\t", " \t  "])
def test_fields_split_on_any_run_of_spaces_and_tabs_as_openssh_reads_them(tmp_path, keys, spacing):
    text = f"  gpu1{spacing}{keys[0].get_name()}{spacing}{keys[0].get_base64()}{spacing}a comment here\n"
    checker(tmp_path, text).check("gpu1", keys[0])
    revoked = f"@revoked{spacing}gpu2{spacing}{keys[1].get_name()}{spacing}{keys[1].get_base64()}\n"
    with pytest.raises(HostKeyError) as caught:
        checker(tmp_path, revoked + line("gpu2", keys[1])).check("gpu2", keys[1])
    assert caught.value.status == "host_key_revoked"


def test_a_changed_key_on_a_two_space_line_is_refused_with_accept_new_and_nothing_is_written(tmp_path, keys):
    text = f"gpu1  {keys[0].get_name()}  {keys[0].get_base64()}\n"
    with pytest.raises(HostKeyError) as caught:
        checker(tmp_path, user_text=text, accept_new=True).check("gpu1", keys[1])
    assert caught.value.status == "host_key_changed"
    assert f"{tmp_path / 'user_known_hosts'}:1" in caught.value.reason
    assert (tmp_path / "own_known_hosts").read_text() == ""
    assert (tmp_path / "user_known_hosts").read_text() == text


def test_several_keys_for_one_host_any_of_them_is_trusted(tmp_path, keys):
    text = line("gpu1,gpu1-alias", keys[0]) + line("gpu1", keys[1])
    check = checker(tmp_path, text)
    check.check("gpu1", keys[0])
    check.check("gpu1", keys[1])
    with pytest.raises(HostKeyError) as caught:
        check.check("gpu1", keys[2])
    assert caught.value.status == "host_key_changed"


def test_an_unreadable_line_naming_the_host_stops_accept_new_from_recording(tmp_path, keys, capsys):
    text = "gpu1 ssh-ed25519 not-base64!!\n"
    with pytest.raises(HostKeyError) as caught:
        checker(tmp_path, user_text=text, accept_new=True).check("gpu1", keys[0])
    assert caught.value.status == "host_key_unknown"
    assert f"{tmp_path / 'user_known_hosts'}:1 names this host" in caught.value.reason
    assert (tmp_path / "own_known_hosts").read_text() == ""
    checker(tmp_path, user_text=text, accept_new=True).check("gpu2", keys[0])   # other hosts: recorded
    assert (tmp_path / "own_known_hosts").read_text() == line("gpu2", keys[0])


def test_the_lines_naming_a_host_are_the_ones_ssh_keygen_finds(tmp_path, keys, capsys):
    """OpenSSH as the oracle: `ssh-keygen -F NAME` lists the lines whose host field names NAME, readable key
    or not; gpudiag reads the same lines as keys or as unreadable lines (warned about). One difference is
    kept on purpose: a line with an invalid marker, which OpenSSH ignores, still stops --accept-new."""
    import re
    import shutil
    import subprocess

    from gpudiag.transports.known_hosts import read_entries

    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen (OpenSSH) is not installed")
    key = f"{keys[0].get_name()} {keys[0].get_base64()}"
    hashed = paramiko.HostKeys.hash_host("gpu1")
    text = (f"gpu1 {key}\n  gpu1\t\t{key}  a comment\n#gpu1 {key}\n@revoked gpu1 {key}\n@bogus gpu1 {key}\n"
            f"gpu1 ssh-ed25519 notbase64!!\ngpu1,other {key}\n!gpu1,* {key}\n[10.0.0.1]:2222 {key}\n"
            f"gpu1 sk-ssh-ed25519@openssh.com AAAA\n{hashed}  {key.replace(' ', chr(9))}\n@cert-authority\t*.lab {key}\n"
            f"gpu1\n\n   \n")
    path = tmp_path / "known_hosts"
    path.write_text(text)
    for name in ("gpu1", "other", "[10.0.0.1]:2222", "n1.lab", "absent"):
        found = subprocess.run(["ssh-keygen", "-F", name, "-f", str(path)], capture_output=True, text=True)
        theirs = sorted(int(n) for n in re.findall(r"found: line (\d+)", found.stdout))
        keys_found, unreadable = read_entries(path, name)
        ours = sorted([k.line for k in keys_found] +
                      [u.line for u in unreadable if not u.why.startswith("invalid marker")])
        assert ours == theirs, (name, ours, theirs)
    assert f"{path}:13: known_hosts line not read: fewer fields" in capsys.readouterr().err


@pytest.mark.parametrize("char", ["\u2028", "\x0c", "\x85", "\r", "\x0b", "\u2029", "\x1c"])
def test_a_comment_holding_a_character_python_splits_lines_at_stays_one_comment(tmp_path, keys, char):
    text = f"# fleet{char}gpu1 {keys[0].get_name()} {keys[0].get_base64()}\n"
    with pytest.raises(HostKeyError) as caught:
        checker(tmp_path, user_text=text).check("gpu1", keys[0])
    assert caught.value.status == "host_key_unknown"
    checker(tmp_path, accept_new=True, user_text=text).check("gpu1", keys[0])   # recorded, as ssh records it
    assert (tmp_path / "own_known_hosts").read_text() == line("gpu1", keys[0])


@pytest.mark.parametrize("where", ["host", "type"])
def test_only_space_and_tab_separate_fields(tmp_path, keys, where):
    name, blob = keys[0].get_name(), keys[0].get_base64()
    text = f"gpu1\u00a0{name} {blob}\n" if where == "host" else f"gpu1 {name}\u00a0{blob}\n"
    with pytest.raises(HostKeyError) as caught:
        checker(tmp_path, user_text=text).check("gpu1", keys[0])
    assert caught.value.status == "host_key_unknown"


def test_a_known_key_of_another_type_makes_a_new_type_a_changed_key(tmp_path, keys):
    rsa = paramiko.RSAKey.generate(1024)
    with pytest.raises(HostKeyError) as caught:
        checker(tmp_path, user_text=line("gpu1", keys[0]), accept_new=True).check("gpu1", rsa)
    assert caught.value.status == "host_key_changed"
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in caught.value.reason and "another key type" in caught.value.reason
    assert (tmp_path / "own_known_hosts").read_text() == ""
    checker(tmp_path, user_text=line("gpu1", keys[0]) + line("gpu1", rsa)).check("gpu1", rsa)


@pytest.mark.parametrize("salt", ["AAAA", "!!", "", "A" * 2000])
def test_a_malformed_hashed_salt_is_a_warning_and_other_lines_still_count(tmp_path, keys, capsys, salt):
    text = f"|1|{salt}|AAAA {keys[0].get_name()} {keys[0].get_base64()}\n" + line("gpu1", keys[0])
    checker(tmp_path, user_text=text).check("gpu1", keys[0])
    assert f"{tmp_path / 'user_known_hosts'}:1: known_hosts line not read: a hashed host name with a malformed salt" \
        in capsys.readouterr().err


def test_a_hashed_name_is_the_whole_host_field_and_commas_do_not_split_it(tmp_path, keys):
    text = line(paramiko.HostKeys.hash_host("other") + ",gpu1", keys[0])
    with pytest.raises(HostKeyError):
        checker(tmp_path, user_text=text).check("gpu1", keys[0])


def test_a_host_on_another_port_is_trusted_by_its_bare_name_as_ssh_does(tmp_path, keys):
    check = checker(tmp_path, user_text=line("gpu1", keys[0]) + f"@revoked gpu2 {keys[1].get_name()} "
                    f"{keys[1].get_base64()}\n" + line("gpu2", keys[1]))
    check.check("[gpu1]:2222", keys[0])
    for name, key in (("[gpu1]:2222", keys[1]), ("[gpu2]:2222", keys[1])):
        with pytest.raises(HostKeyError) as caught:
            check.check(name, key)
        assert caught.value.status == "host_key_unknown"


def test_the_line_type_must_be_the_blobs(tmp_path, keys):
    rsa = paramiko.RSAKey.generate(1024)
    text = f"gpu1 ecdsa-sha2-nistp384 {keys[0].get_base64()}\ngpu1 ssh-ed25519 {rsa.get_base64()}\n"
    with pytest.raises(HostKeyError) as caught:
        checker(tmp_path, user_text=text).check("gpu1", keys[0])
    assert caught.value.status == "host_key_unknown"


def test_a_named_record_file_takes_new_keys_and_a_missing_known_hosts_file_knows_none(tmp_path, keys):
    own = tmp_path / "own"
    first, later = tmp_path / "first", tmp_path / "later"
    later.write_text(line("[h]:2200", keys[1]))
    check = HostKeyChecker(accept_new=True, own_file=str(own), extra_files=[str(first), str(later)],
                           record_to=str(first))
    check.check("[h]:2200", keys[1])   # known from the second file though the first does not exist
    assert not first.exists()
    check.check("[n]:2200", keys[0])
    assert first.read_text() == line("[n]:2200", keys[0]) and not own.exists()
    with pytest.raises(HostKeyError) as caught:   # recorded ones are read back: a changed key is refused
        check.check("[n]:2200", keys[2])
    assert caught.value.status == "host_key_changed"


def test_a_record_file_that_cannot_be_written_leaves_the_host_unknown(tmp_path, keys):
    missing_dir = tmp_path / "no" / "such"
    check = HostKeyChecker(accept_new=True, own_file=str(tmp_path / "own"), extra_files=[str(missing_dir / "kh")],
                           record_to=str(missing_dir / "kh"))
    with pytest.raises(HostKeyError) as caught:
        check.check("[n]:2200", keys[0])
    assert caught.value.status == "host_key_unknown"
    assert f"cannot be recorded in {missing_dir / 'kh'}" in caught.value.reason
    assert not missing_dir.exists()   # as ssh, no directory is made for a UserKnownHostsFile
