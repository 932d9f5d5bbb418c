"""PACS nodes: the URL forms, one-line errors naming the bad part, the settings' pacs section, secrets."""

from __future__ import annotations

import logging
from pathlib import Path

import keyring
import keyring.backend
import keyring.backends.fail
import pytest

from app.io.pacs.client import PacsError
from app.io.pacs.nodes import PacsNode, load_nodes, node_secret, parse_node


def test_a_dimse_url() -> None:
    node = parse_node("dimse://ORTHANC@pacs.example:4242?calling=VIEWER&research=1&timeout=5&store_port=11112")
    assert node == PacsNode(name="dimse://ORTHANC@pacs.example:4242?calling=VIEWER&research=1&timeout=5&store_port=11112",
                            kind="dimse", host="pacs.example", port=4242, called_ae="ORTHANC", calling_ae="VIEWER",
                            research=True, timeout_s=5.0, store_port=11112)
    assert parse_node("dimse://PACS@10.0.0.2").port == 104
    tls = parse_node("dimse://PACS@host:2762?ca=/etc/ca.pem")
    assert tls.tls and tls.ca_bundle == Path("/etc/ca.pem")


def test_dicomweb_urls() -> None:
    node = parse_node("dicomweb+https://pacs.example/dicom-web/?user=alice")
    assert (node.kind, node.host, node.port, node.url, node.tls, node.auth, node.username) == (
        "dicomweb", "pacs.example", 443, "https://pacs.example/dicom-web", True, "basic", "alice")
    plain = parse_node("dicomweb+http://127.0.0.1:8042/dicom-web")
    assert (plain.url, plain.port, plain.tls, plain.auth) == ("http://127.0.0.1:8042/dicom-web", 8042, False, "none")
    assert parse_node("dicomweb+https://h/dw?auth=bearer").auth == "bearer"


@pytest.mark.parametrize(("text", "problem"), [
    ("pacs.example:104", "not a node name nor a URL (dicomweb+https://host/dicom-web or dimse://AE@host:104)"),
    ("dimse://pacs.example:104", "no called AE title (dimse://CALLED_AE@host:104)"),
    ("dimse://A_TITLE_LONGER_THAN_16@h:104",
     "called AE title 'A_TITLE_LONGER_THAN_16' is not 1-16 printable characters"),
    ("dimse://PACS@h:104?calling=", "calling AE title '' is not 1-16 printable characters"),
    ("dimse://PACS@h:99999", "port='99999' is out of range"),
    ("dimse://PACS@h:abc", "port='abc' is not a number"),
    ("dimse://PACS@:104", "no host"),
    ("dimse://PACS@h:104?colour=red",
     "unknown option 'colour' (known: ca, calling, research, store_port, timeout, tls)"),
    ("dicomweb+https://h/dw?calling=X", "unknown option 'calling' (known: auth, ca, research, timeout, user)"),
    ("dimse://PACS@h:104?research=maybe", "research='maybe' is not 1 or 0"),
    ("dimse://PACS@h:104?timeout=0", "timeout='0' is out of range"),
    ("dimse://PACS@h:104/path", "a DIMSE node has no path ('/path')"),
    ("dicomweb+https://bob:pw@h/dicom-web", "no user or password in the URL (use ?user=NAME and the keyring)"),
    ("dicomweb+https://h/dw?auth=magic", "auth='magic' is not none, basic or bearer"),
])
def test_bad_text_is_one_line_naming_the_part(text: str, problem: str) -> None:
    with pytest.raises(PacsError) as err:
        parse_node(text)
    assert str(err.value) == f"pacs node {text!r}: {problem}"


def test_a_name_from_the_settings(tmp_path: Path) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text("other: 1\npacs:\n  ORTHANC:\n    url: dimse://ORTHANC@pacs:4242\n    calling_ae: SEG1\n"
                        "    store_port: 11112\n  RESEARCH:\n    url: dicomweb+https://research/dicom-web\n"
                        "    auth: bearer\n    research: true\n    ca_bundle: /etc/ca.pem\n", encoding="utf-8")
    nodes = load_nodes(settings)
    assert sorted(nodes) == ["ORTHANC", "RESEARCH"]
    assert parse_node("ORTHANC", nodes) == PacsNode(name="ORTHANC", kind="dimse", host="pacs", port=4242,
                                                    called_ae="ORTHANC", calling_ae="SEG1", store_port=11112,
                                                    secret_envs=("SEGLENS_PACS_SECRET_ORTHANC",))
    research = nodes["RESEARCH"]
    assert (research.auth, research.research, research.ca_bundle, research.tls) == (
        "bearer", True, Path("/etc/ca.pem"), True)
    with pytest.raises(PacsError, match=r"^pacs node 'NOPE': not a node name \(known nodes: ORTHANC, RESEARCH\)"):
        parse_node("NOPE", nodes)


def test_an_alias_bomb_in_the_settings_is_one_line(tmp_path: Path) -> None:
    """Nested aliases (a "billion laughs") are refused at the first anchor, before anything expands."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 10)]
    settings = tmp_path / "settings.yaml"
    settings.write_text("\n".join(lines) + "\npacs:\n  A:\n    url: dimse://A@h:1\n    called_ae: *a9\n",
                        encoding="utf-8")
    with pytest.raises(PacsError) as err:
        load_nodes(settings)
    assert str(err.value) == f"{settings}: YAML anchors/aliases are not allowed in a settings file (line 1)"


def test_a_settings_file_too_large_or_not_a_file(tmp_path: Path) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_bytes(b"# " + b"x" * (2 << 20) + b"\npacs: {}\n")
    with pytest.raises(PacsError) as err:
        load_nodes(settings)
    assert str(err.value).startswith(f"{settings}: settings file too large (")
    big = tmp_path / "settings.json"
    big.write_bytes(b'{"pacs": {}, "x": "' + b"x" * (2 << 20) + b'"}')
    with pytest.raises(PacsError) as err:
        load_nodes(big)
    assert str(err.value).startswith(f"{big}: settings file too large (")


def test_json_settings_and_none(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text('{"pacs": {"W": {"url": "dicomweb+http://h:8042/dicom-web"}}}', encoding="utf-8")
    assert load_nodes(settings)["W"].url == "http://h:8042/dicom-web"
    assert load_nodes(tmp_path / "absent.yaml") == {}


@pytest.mark.parametrize(("text", "problem"), [
    ("pacs:\n  A:\n    url: dimse://A@h:1\n    password: hunter2\n",
     "pacs.A: password does not belong in the settings (keep it in the keyring)"),
    ("pacs:\n  A:\n    host: h\n", "pacs.A: needs a url (dicomweb+https://… or dimse://AE@host:port)"),
    ("pacs:\n  A:\n    url: ftp://h\n", "pacs.A: url 'ftp://h' is not dicomweb+https://… nor dimse://AE@host:port"),
    ("pacs:\n  A:\n    url: dimse://A@h:1\n    colour: red\n", "pacs.A: unknown key 'colour'"),
    ("pacs:\n  A:\n    url: dimse://A@h:1\n    research: yes please\n", "pacs.A: research is not true or false"),
    ("pacs:\n  A:\n    url: dimse://A@h:1\n    timeout_s: soon\n", "pacs.A: timeout_s is not a number ≥ 0"),
    ("pacs:\n  A:\n    url: dimse://A@h:1\n    calling_ae: A_TITLE_LONGER_THAN_16\n",
     "pacs.A: calling_ae 'A_TITLE_LONGER_THAN_16' is not 1-16 printable characters"),
    ("pacs: [1, 2]\n", "the pacs section is not a mapping of node names"),
    ("pacs: {\n", "invalid YAML at line 2: expected the node content, but found '<stream end>'"),
    ("pacs:\n  A: &node\n    url: dimse://A@h:1\n  B: *node\n",
     "YAML anchors/aliases are not allowed in a settings file (line 2)"),
    ("pacs:\n  A:\n    url: dimse://A@h:1\n  A:\n    url: dimse://B@h:1\n",
     "invalid YAML at line 4: duplicate key 'A'"),
])
def test_bad_settings_are_one_line(tmp_path: Path, text: str, problem: str) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text(text, encoding="utf-8")
    with pytest.raises(PacsError) as err:
        load_nodes(settings)
    assert str(err.value) == f"{settings}: {problem}"
    assert "hunter2" not in str(err.value)


class _MemoryKeyring(keyring.backend.KeyringBackend):
    """A keyring backend in memory (keyring's own plug-in interface), standing in for the OS keyring."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.secrets: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.secrets.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.secrets[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.secrets.pop((service, username), None)


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SEGLENS_PACS_SECRET", raising=False)
    before = keyring.get_keyring()

    def use(chosen: keyring.backend.KeyringBackend) -> keyring.backend.KeyringBackend:
        keyring.set_keyring(chosen)
        return chosen

    yield use
    keyring.set_keyring(before)


NODE = PacsNode(name="ORTHANC", kind="dicomweb", host="h", port=443, url="https://h/dicom-web", auth="basic",
                username="alice")


def test_the_secret_from_the_keyring_and_the_environment_wins(backend, monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    store = backend(_MemoryKeyring())
    assert node_secret(NODE) is None
    store.set_password("seglens-pacs", "ORTHANC", "s3cret-from-keyring")
    with caplog.at_level(logging.DEBUG):
        assert node_secret(NODE) == "s3cret-from-keyring"
    monkeypatch.setenv("SEGLENS_PACS_SECRET", "s3cret-from-env")
    assert node_secret(NODE) == "s3cret-from-env"
    assert "s3cret" not in caplog.text


def test_no_usable_keyring_is_one_line(backend) -> None:
    backend(keyring.backends.fail.Keyring())
    with pytest.raises(PacsError) as err:
        node_secret(NODE)
    assert str(err.value) == ("pacs ORTHANC: no usable keyring (NoKeyringError); set SEGLENS_PACS_SECRET or install "
                              "a keyring backend")


# --- a secret from the environment only for the node it was meant for ----------------------------------------


def _settings(tmp_path: Path, text: str) -> dict[str, PacsNode]:
    settings = tmp_path / "settings.yaml"
    settings.write_text(text, encoding="utf-8")
    return load_nodes(settings)


TWO_WEB_NODES = ("pacs:\n  A:\n    url: dicomweb+https://a/dicom-web\n    auth: basic\n    username: alice\n"
                 "  b-web:\n    url: dicomweb+https://b/dicom-web\n    auth: bearer\n"
                 "  D:\n    url: dimse://D@h:104\n")


def test_each_settings_node_reads_its_own_variable_never_the_plain_one(backend, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    backend(_MemoryKeyring())
    nodes = _settings(tmp_path, TWO_WEB_NODES)
    assert nodes["A"].secret_envs == ("SEGLENS_PACS_SECRET_A",)
    assert nodes["b-web"].secret_envs == ("SEGLENS_PACS_SECRET_B_WEB",)
    monkeypatch.setenv("SEGLENS_PACS_SECRET", "meant-for-someone")
    monkeypatch.setenv("SEGLENS_PACS_SECRET_A", "alice-password")
    assert node_secret(nodes["A"]) == "alice-password"
    assert node_secret(nodes["b-web"]) is None  # not A's, not the plain one: two nodes have auth
    monkeypatch.setenv("SEGLENS_PACS_SECRET_B_WEB", "b-token")
    assert node_secret(nodes["b-web"]) == "b-token"


def test_the_plain_variable_goes_to_the_one_node_with_auth_or_the_one_named(backend, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    backend(_MemoryKeyring())
    monkeypatch.setenv("SEGLENS_PACS_SECRET", "the-one")
    monkeypatch.setenv("CI_PACS_TOKEN", "ci-token")
    one = _settings(tmp_path, "pacs:\n  W:\n    url: dicomweb+https://w/dicom-web\n    auth: bearer\n"
                              "  D:\n    url: dimse://D@h:104\n")
    assert node_secret(one["W"]) == "the-one"
    named = _settings(tmp_path, TWO_WEB_NODES.replace("auth: bearer\n",
                                                      "auth: bearer\n    secret_env: CI_PACS_TOKEN\n"))
    assert named["b-web"].secret_envs == ("SEGLENS_PACS_SECRET_B_WEB", "CI_PACS_TOKEN")
    assert node_secret(named["b-web"]) == "ci-token" and node_secret(named["A"]) is None
    assert node_secret(parse_node("dicomweb+https://h/dw?user=bob")) == "the-one"  # a URL given on the command line


@pytest.mark.parametrize(("text", "problem"), [
    ("pacs:\n  a-b:\n    url: dimse://A@h:1\n  A_B:\n    url: dimse://B@h:1\n",
     "pacs.a-b and pacs.A_B would share the secret variable SEGLENS_PACS_SECRET_A_B: rename one"),
    ("pacs:\n  A:\n    url: dimse://A@h:1\n    secret_env: 'not a name'\n",
     "pacs.A: secret_env is not the name of an environment variable"),
])
def test_bad_secret_settings_are_one_line(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(PacsError) as err:
        _settings(tmp_path, text)
    assert str(err.value) == f"{tmp_path / 'settings.yaml'}: {problem}"


def test_one_variable_is_never_sent_to_two_nodes_of_one_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.io.pacs.nodes import shared_secret_problem

    a, b = parse_node("dicomweb+https://a/dw?user=x"), parse_node("dicomweb+https://b/dw?user=y")
    assert shared_secret_problem(a, b) is None  # nothing set: each from the keyring
    monkeypatch.setenv("SEGLENS_PACS_SECRET", "s")
    assert shared_secret_problem(a, b) == (
        f"$SEGLENS_PACS_SECRET would be sent to two nodes ({a.name} and {b.name}): give each node its own secret "
        "(a settings node NAME reads SEGLENS_PACS_SECRET_NAME, or the keyring)")
    assert shared_secret_problem(a, a) is None and shared_secret_problem(a, None) is None
    assert shared_secret_problem(a, parse_node("dimse://D@h:104")) is None


def test_one_send_rule_for_every_face() -> None:
    """De-identified results only to a research node, identified ones never to one: the CLI's plan and `pacs send`
    and the viewer's Send to PACS all ask app.io.pacs.nodes.send_refusal."""
    from app.io.pacs.nodes import send_refusal
    from app.ui.workers.pacs_send import send_refusal as viewer_refusal

    plain, research = parse_node("dimse://P@h:104"), parse_node("dimse://R@h:104?research=1")
    assert send_refusal(plain, deidentified=False) is None and send_refusal(research, deidentified=True) is None
    to_plain, to_research = send_refusal(plain, deidentified=True), send_refusal(research, deidentified=False)
    assert to_plain is not None and to_plain.startswith("a de-identified (pseudonymised) result is sent only to a ")
    assert to_research is not None and to_research.startswith("an identified result is never sent to a research ")
    assert viewer_refusal(plain, anonymize=True) == f"pacs {plain.name}: {to_plain}"
    assert viewer_refusal(research, anonymize=False) == f"pacs {research.name}: {to_research}"
    assert viewer_refusal(research, anonymize=True) is None


def test_a_settings_file_that_is_not_a_regular_file_is_one_line_not_no_nodes(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "settings.yaml"
    os.mkfifo(fifo)
    with pytest.raises(PacsError) as err:
        load_nodes(fifo)  # was {}: a FIFO (or /dev/zero, a folder) read as no nodes at all
    assert str(err.value) == f"{fifo}: cannot read the settings (not a regular file: a named pipe (FIFO))"
    with pytest.raises(PacsError) as err:
        load_nodes(tmp_path)
    assert str(err.value) == f"{tmp_path}: cannot read the settings (not a regular file: a folder)"
