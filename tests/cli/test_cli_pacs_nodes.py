"""Where the PACS nodes come from, said by the CLI: `seglens-cli pacs --help` names the settings file read,
`seglens-cli pacs nodes` lists its nodes under its path (or says there are none there), and a node name that is
not in it names the file to add it to. No server needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site settings.yaml"
    monkeypatch.setenv("SEGLENS_SETTINGS", str(path))
    return path


def test_pacs_help_names_the_settings_file(settings, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # argparse wraps at a hyphen too
    with pytest.raises(SystemExit):
        main(["pacs", "--help"])
    assert str(settings) in capsys.readouterr().out


def test_pacs_nodes_lists_the_nodes_under_the_settings_file(settings, capsys):
    settings.write_text("pacs:\n  ORTHANC: {url: 'dimse://ORTHANC@127.0.0.1:4242'}\n"
                        "  WEB: {url: 'dicomweb+https://pacs.example/dicom-web', research: true}\n")
    assert main(["pacs", "nodes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"PACS nodes in {settings}:"
    assert lines[1].split()[0] == "ORTHANC" and "DIMSE" in lines[1] and "127.0.0.1:4242" in lines[1]
    assert lines[2].split()[0] == "WEB" and "DICOMweb" in lines[2] and "research" in lines[2]


def test_pacs_nodes_without_a_settings_file_says_where_to_write_one(settings, capsys):
    assert main(["pacs", "nodes"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [f"no PACS nodes: {settings} does not exist (add a pacs: section there, "
                                "docs/clinical.md)"]


def test_an_unknown_node_name_names_the_settings_file(settings, capsys):
    settings.write_text("pacs:\n  ORTHANC: {url: 'dimse://ORTHANC@127.0.0.1:4242'}\n")
    assert main(["pacs", "echo", "ORTHANX"]) != 0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"nodes are read from {settings}" in err
