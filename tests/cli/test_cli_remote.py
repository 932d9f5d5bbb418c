"""seglens-cli run / info / bench / compare --device remote against the Open Inference Protocol mock
(tests/remote_mocks.py): the masks a local CPU run makes, the report and record saying "remote: host/model (…)",
the latency split in the summary, and every refusal one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from remote_mocks import MockServer
from test_cli import read_report

from app.cli import main

REPO = Path(__file__).resolve().parents[2]
NUCLEI = REPO / "models" / "nuclei.onnx"


@pytest.fixture(scope="module")
def server():
    with MockServer(NUCLEI, name="nuclei", token="s3cret", device="CPU") as mock:
        yield mock


@pytest.fixture
def token(monkeypatch):
    monkeypatch.setenv("SEGLENS_REMOTE_TOKEN", "s3cret")


def _images(folder: Path, count: int = 3) -> Path:
    folder.mkdir()
    for i in range(count):
        pixels = np.random.default_rng(i).integers(0, 256, (120 + 7 * i, 140), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"cell{i}.png")
    return folder


def _masks(out: Path) -> dict[str, np.ndarray]:
    return {p.name: np.asarray(Image.open(p)) for p in sorted(out.glob("*_mask.png"))}


@pytest.mark.parametrize("face", ["grpc", "http"])
def test_run_remote_writes_the_masks_of_a_local_cpu_run(server, token, tmp_path, capsys, face):
    images = _images(tmp_path / "images")
    url = server.grpc_url if face == "grpc" else server.http_url
    assert main(["run", "nuclei", str(images), "--out", str(tmp_path / "local"), "--device", "cpu"]) == 0
    assert main(["run", "nuclei", str(images), "--out", str(tmp_path / "remote"), "--device", "remote",
                 "--server", url]) == 0
    local, remote = _masks(tmp_path / "local"), _masks(tmp_path / "remote")
    assert local.keys() == remote.keys() and len(local) == 3
    assert all(np.array_equal(local[name], remote[name]) for name in local)
    label = f"remote: 127.0.0.1:{url.rsplit(':', 1)[1]}/nuclei (onnxruntime_onnx, CPU)"
    rows = read_report(tmp_path / "remote" / "seglens_report.csv")
    assert {row["provider"] for row in rows} == {label} and {row["status"] for row in rows} == {"ok"}
    record = json.loads((tmp_path / "remote" / "seglens_report.csv.run.json").read_text())
    assert record["provider"] == label and record["model"] == "nuclei" and record["requested_device"] == "remote"
    out = capsys.readouterr().out
    assert f"provider {label}" in out
    assert "remote latency per request: network+queue " in out and "server compute " in out
    assert "(mean of 3)" in out


def test_info_over_the_wire_matches_info_of_the_file(server, token, capsys):
    assert main(["info", "nuclei", "--json", "--no-session"]) == 0
    here = json.loads(capsys.readouterr().out)
    assert main(["info", "nuclei", "--json", "--device", "remote", "--server", server.grpc_url]) == 0
    there = json.loads(capsys.readouterr().out)
    assert there["remote"]["label"].endswith("/nuclei (onnxruntime_onnx, CPU)")
    assert there["remote"]["protocol"] == "grpc" and there["session"]["provider"] == there["remote"]["label"]
    for key in ("model", "producer", "opset", "metadata", "inputs", "outputs", "session", "remote"):
        here.pop(key, None), there.pop(key, None)
    assert there == here


@pytest.mark.parametrize("token_value, problem", [(None, "not authorised"), ("t0k-bad-9", "not authorised")])
def test_no_token_or_a_wrong_one_is_one_line_exit_2(server, tmp_path, capsys, monkeypatch, token_value, problem):
    if token_value:
        monkeypatch.setenv("SEGLENS_REMOTE_TOKEN", token_value)
    else:
        monkeypatch.delenv("SEGLENS_REMOTE_TOKEN", raising=False)
    images = _images(tmp_path / "images", 1)
    code = main(["run", "nuclei", str(images), "--out", str(tmp_path / "out"), "--device", "remote",
                 "--server", server.http_url])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and problem in err[0] and "retrying" not in err[0]
    assert err[0].startswith("error: remote 127.0.0.1:") and "s3cret" not in err[0] and "t0k-bad-9" not in err[0]
    assert err[0].endswith("no token or a wrong one (--token-env, default SEGLENS_REMOTE_TOKEN; or --user with "
                           "--password-env)")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("argv, line", [
    (["--device", "remote"], "error: --device remote needs --server URL"),
    (["--server", "grpc://127.0.0.1:1"], "error: --server is for --device remote"),
    (["--device", "remote", "--server", "tcp://h:1"],
     "error: --server 'tcp://h:1': expected grpc://, grpcs://, http:// or https://"),
    (["--device", "remote", "--server", "grpc://h:1", "--token-env", "T1_UNSET_VARIABLE"],
     "error: --token-env T1_UNSET_VARIABLE: that environment variable is not set"),
    (["--device", "remote", "--server", "grpc://h:1", "--user", "u", "--password-env", "T1_UNSET_VARIABLE"],
     "error: --password-env T1_UNSET_VARIABLE: that environment variable is not set"),
])
def test_remote_usage_errors_are_one_line_exit_2(tmp_path, capsys, argv, line):
    code = main(["info", "nuclei", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and line in err[0]


def test_server_killed_mid_run_keeps_the_finished_rows_and_errors_the_rest(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SEGLENS_REMOTE_TOKEN", raising=False)
    images = _images(tmp_path / "images", 5)
    with MockServer(NUCLEI, name="nuclei") as mock:
        mock.state.die_after = 3  # the warm-up and two images are answered, then the server is gone
        code = main(["run", "nuclei", str(images), "--out", str(tmp_path / "out"), "--device", "remote",
                     "--server", mock.grpc_url, "--retries", "1", "--timeout", "5", "--in-flight", "1"])
    assert code == 1
    rows = read_report(tmp_path / "out" / "seglens_report.csv")
    assert [row["status"] for row in rows] == ["ok", "ok", "error", "error", "error"]
    assert all(row["error"].startswith(f"{images / row['path'].rsplit('/', 1)[1]}: remote 127.0.0.1:")
               or "remote 127.0.0.1:" in row["error"] for row in rows[2:])
    assert sorted(_masks(tmp_path / "out")) == ["cell0.png_mask.png", "cell1.png_mask.png"]
    assert not list((tmp_path / "out").rglob("*.tmp")) and not list((tmp_path / "out").rglob("*.partial"))
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("retrying in") == 1  # retried once, then each input tried once


def test_bench_remote_reports_the_latency_split(server, token, capsys):
    assert main(["bench", "nuclei", "--device", "remote", "--server", server.http_url, "--runs", "2",
                 "--size", "64x64", "--save", "none"]) == 0
    out = capsys.readouterr().out
    assert "nuclei on remote: 127.0.0.1:" in out and "remote latency per request: network+queue " in out


def test_compare_remote_runs_both_models_on_the_server(server, token, tmp_path, capsys):
    images = _images(tmp_path / "images", 2)
    assert main(["compare", "nuclei", "nuclei", str(images), "--out", str(tmp_path / "cmp"), "--device", "remote",
                 "--server", server.grpc_url]) == 0
    assert "all identical" in capsys.readouterr().out


@pytest.mark.parametrize("face", ["grpc", "http"])
def test_a_folder_run_keeps_requests_in_flight_and_its_rows_in_order(token, tmp_path, face):
    images = _images(tmp_path / "images", 6)
    assert main(["run", "nuclei", str(images), "--out", str(tmp_path / "local"), "--device", "cpu"]) == 0
    with MockServer(NUCLEI, name="nuclei", token="s3cret") as mock:
        mock.state.meet = 2  # after the warm-up, requests are answered only two at a time: sent concurrently
        url = mock.grpc_url if face == "grpc" else mock.http_url
        assert main(["run", "nuclei", str(images), "--out", str(tmp_path / "remote"), "--device", "remote",
                     "--server", url, "--in-flight", "3"]) == 0
    assert mock.state.met >= 2
    rows = read_report(tmp_path / "remote" / "seglens_report.csv")
    assert [Path(row["path"]).name for row in rows] == [f"cell{i}.png" for i in range(6)]
    local, remote = _masks(tmp_path / "local"), _masks(tmp_path / "remote")
    assert local.keys() == remote.keys() and all(np.array_equal(local[k], remote[k]) for k in local)


@pytest.mark.parametrize("face", ["grpc", "http"])
def test_server_killed_with_requests_in_flight_leaves_whole_outputs_and_a_row_each(tmp_path, monkeypatch, face):
    monkeypatch.delenv("SEGLENS_REMOTE_TOKEN", raising=False)
    images = _images(tmp_path / "images", 8)
    with MockServer(NUCLEI, name="nuclei") as mock:
        mock.state.die_after = 4
        url = mock.grpc_url if face == "grpc" else mock.http_url
        code = main(["run", "nuclei", str(images), "--out", str(tmp_path / "out"), "--device", "remote",
                     "--server", url, "--retries", "1", "--timeout", "5", "--in-flight", "3"])
    out = tmp_path / "out"
    rows = read_report(out / "seglens_report.csv")
    assert code == 1 and [Path(row["path"]).name for row in rows] == [f"cell{i}.png" for i in range(8)]
    ok = {Path(row["path"]).name for row in rows if row["status"] == "ok"}
    assert {row["status"] for row in rows} <= {"ok", "error"} and len(ok) <= 3 and rows[-1]["status"] == "error"
    assert {name.removesuffix("_mask.png") for name in _masks(out)} == ok  # every mask whole, one per ok row
    assert not list(out.rglob("*.tmp")) and not list(out.rglob("*.partial"))


def test_resume_after_a_killed_server_finishes_the_run_against_it_again(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SEGLENS_REMOTE_TOKEN", raising=False)
    images, out = _images(tmp_path / "images", 4), tmp_path / "out"
    with MockServer(NUCLEI, name="nuclei") as mock:
        mock.state.die_after = 2  # the warm-up and one image
        port = mock.grpc_port
        argv = ["run", "nuclei", str(images), "--out", str(out), "--device", "remote", "--server", mock.grpc_url,
                "--retries", "0", "--in-flight", "1"]
        assert main(argv) == 1
    assert [row["status"] for row in read_report(out / "seglens_report.csv")] == ["ok", "error", "error", "error"]
    with MockServer(NUCLEI, name="nuclei", grpc_port=port) as again:  # the server back, where it was
        assert main([*argv, "--resume"]) == 0
        assert again.state.requests == 1 + 3  # its warm-up and the three that failed, not the finished one
    assert [row["status"] for row in read_report(out / "seglens_report.csv")] == ["ok"] * 4
    assert len(_masks(out)) == 4


def test_a_3d_model_on_the_server_writes_the_label_volume_of_a_local_run(tmp_path, monkeypatch):
    import nibabel as nib
    from volume3d_models import pointwise

    monkeypatch.delenv("SEGLENS_REMOTE_TOKEN", raising=False)
    model = pointwise(tmp_path / "p.onnx")  # a 3D model, voxel by voxel
    model.with_suffix(".yaml").write_text("input:\n  patch: [4, 8, 8]\n")
    inputs = tmp_path / "in"
    inputs.mkdir()
    volume = np.random.default_rng(0).random((20, 12, 9), np.float32)
    nib.save(nib.Nifti1Image(volume, np.diag([1.0, 1.0, 2.0, 1.0])), str(inputs / "v.nii.gz"))
    assert main(["run", str(model), str(inputs), "--out", str(tmp_path / "local"), "--device", "cpu"]) == 0
    with MockServer(model, name="p") as mock:
        assert main(["run", str(model), str(inputs), "--out", str(tmp_path / "remote"), "--device", "remote",
                     "--server", mock.grpc_url]) == 0
    local, remote = (np.asarray(nib.load(str(tmp_path / d / "v.nii.gz_mask.nii.gz")).dataobj)
                     for d in ("local", "remote"))
    assert np.array_equal(local, remote) and len(np.unique(remote)) == 3


@pytest.mark.parametrize("face", ["grpc", "http"])
def test_basic_auth_takes_the_password_from_the_environment(tmp_path, capsys, monkeypatch, face):
    monkeypatch.delenv("SEGLENS_REMOTE_TOKEN", raising=False)
    monkeypatch.setenv("T1_PASSWORD", "pa55:word")
    monkeypatch.setenv("T1_WRONG", "pa55:w0rd")
    images = _images(tmp_path / "images", 2)
    assert main(["run", "nuclei", str(images), "--out", str(tmp_path / "local"), "--device", "cpu"]) == 0
    capsys.readouterr()
    with MockServer(NUCLEI, name="nuclei", token="basic:ann:pa55:word") as mock:  # 'Basic base64(ann:pa55:word)'
        url = mock.grpc_url if face == "grpc" else mock.http_url
        base = ["run", "nuclei", str(images), "--device", "remote", "--server", url, "--user", "ann"]
        assert main([*base, "--out", str(tmp_path / "wrong"), "--password-env", "T1_WRONG"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        status = "gRPC UNAUTHENTICATED" if face == "grpc" else "HTTP 401"
        assert err == [f"error: remote 127.0.0.1:{url.rsplit(':', 1)[1]}/nuclei: refused: not authorised ({status}: "
                       "unauthorized): no token or a wrong one (--token-env, default SEGLENS_REMOTE_TOKEN; or --user "
                       "with --password-env)"]
        assert not (tmp_path / "wrong").exists() or not any((tmp_path / "wrong").iterdir())
        assert main([*base, "--out", str(tmp_path / "remote"), "--password-env", "T1_PASSWORD"]) == 0
    local, remote = _masks(tmp_path / "local"), _masks(tmp_path / "remote")
    assert local.keys() == remote.keys() and len(local) == 2
    assert all(np.array_equal(local[name], remote[name]) for name in local)
    captured = capsys.readouterr()
    assert "pa55" not in captured.err + captured.out


def test_a_refusal_keeps_the_cli_hint_apart_from_its_line(server, monkeypatch):
    import argparse

    from app.cli.remote_options import add_remote_options, open_remote
    from app.inference.remote.session import RemoteError, RemoteTarget, open_remote_session

    monkeypatch.setenv("SEGLENS_REMOTE_TOKEN", "wrong")
    parser = argparse.ArgumentParser()
    add_remote_options(parser)
    with pytest.raises(RemoteError) as cli:
        open_remote(parser.parse_args(["--server", server.grpc_url]), Path("nuclei"))
    error = cli.value
    assert error.kind == "auth" and error.hint == "--token-env, default SEGLENS_REMOTE_TOKEN; or --user with " \
                                                  "--password-env"
    assert str(error) == f"{error.message} ({error.hint})"  # what the CLI prints, as before
    assert error.message.endswith("/nuclei: refused: not authorised (gRPC UNAUTHENTICATED: unauthorized): no token "
                                  "or a wrong one")
    with pytest.raises(RemoteError) as core:  # the session's own error: no option named, no hint
        open_remote_session(RemoteTarget(server.grpc_url, "nuclei", token="wrong"))
    assert core.value.hint is None and str(core.value) == core.value.message == error.message


@pytest.mark.parametrize("command", [["info", "nuclei", "--json"], ["bench", "nuclei", "--runs", "1", "--size",
                                                                    "64x64", "--save", "none"]])
@pytest.mark.parametrize("where", ["cpu", "remote"])
def test_info_and_bench_open_every_session_through_the_one_opener(server, token, capsys, monkeypatch, command,
                                                                  where):
    from app.inference.remote import opener

    opened, open_model_session = [], opener.open_model_session

    def recorded(model, **options):
        session = open_model_session(model, **options)
        opened.append(type(model).__name__)
        return session

    monkeypatch.setattr(opener, "open_model_session", recorded)
    device = ["--device", "cpu"] if where == "cpu" else ["--device", "remote", "--server", server.grpc_url]
    assert main([*command, *device]) == 0
    assert opened == ["ModelSpec" if where == "cpu" else "RemoteTarget"]
    out = capsys.readouterr().out
    assert ("remote" in out) == (where == "remote")  # what the session says of where it runs, from its info


def test_bench_remote_json_keeps_its_facts_and_no_gpu_memory_of_this_machine(server, token, capsys):
    assert main(["bench", "nuclei", "--json", "--device", "remote", "--server", server.grpc_url, "--runs", "2",
                 "--size", "64x64", "--save", "none"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["gpu_over_cpu"] is None and not any(key.startswith("gpu_mem") for key in report)
    assert report["remote"]["tls"] is False and report["remote"]["protocol"] == "grpc"
    assert report["remote"]["last_timing_ms"]["network_queue"] >= 0
    assert report["remote_latency"].startswith("remote latency per request: network+queue ")


def test_info_no_session_over_the_wire_says_where_it_runs(server, token, capsys):
    assert main(["info", "nuclei", "--no-session", "--device", "remote", "--server", server.http_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("  remote: 127.0.0.1:") and lines[-1].endswith(", over http")
