"""PyTorch checkpoints read without PyTorch (app.io.checkpoint): what torch.save writes reads back equal, and a
`.pth` that asks for anything but tensors and plain values is refused in one line, with nothing run."""

from __future__ import annotations

import collections
import io
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from app.errors import ModelError
from app.io import checkpoint_pickle
from app.io.checkpoint import network_weights, read_checkpoint, read_tensors, tensors
from app.io.checkpoint_pickle import MAX_DEPTH, MAX_ENTRIES, TensorRef


def _torch():  # type: ignore[no-untyped-def]
    return pytest.importorskip("torch")


def _as_numpy(tensor):  # type: ignore[no-untyped-def]
    torch = _torch()
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).detach().contiguous().numpy()


def _zip(path: Path, pickled: bytes, storages: dict[str, bytes] | None = None) -> Path:
    """A checkpoint laid out as torch.save lays it out, with any pickle and storages."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pickled)
        archive.writestr("archive/byteorder", "little")
        for key, data in (storages or {}).items():
            archive.writestr(f"archive/data/{key}", data)
        archive.writestr("archive/version", "3\n")
    return path


def _storage_pickle(numel: int, shape: tuple[int, ...], stride: tuple[int, ...], offset: int = 0) -> bytes:
    """The pickle torch.save writes for {'w': tensor}, with any numbers in it (protocol 2, by hand)."""
    def tup(values: tuple[int, ...]) -> bytes:
        return b"(" + b"".join(_long(v) for v in values) + b"t"

    persistent = (b"(X\x07\x00\x00\x00storagec" + b"torch\nFloatStorage\n" + b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpu"
                  + _long(numel) + b"tQ")
    return (b"\x80\x02}(X\x01\x00\x00\x00wctorch._utils\n_rebuild_tensor_v2\n(" + persistent
            + _long(offset) + tup(shape) + tup(stride) + b"\x89ccollections\nOrderedDict\n)RtRu.")


def _long(value: int) -> bytes:
    raw = value.to_bytes(16, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw  # LONG1


# --- what torch.save writes ----------------------------------------------------------------------------------

def test_a_state_dict_of_every_kind_reads_back_equal(tmp_path: Path) -> None:
    torch = _torch()
    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    state = collections.OrderedDict(
        weight=base, transposed=base.t(), stepped=base[::2, 1::3], offset=base[2:], row=base[3],
        half=base.half(), bf16=(base / 7).bfloat16(), long=torch.arange(-5, 5), flag=torch.tensor([True, False]),
        scalar=torch.tensor(3.5), empty=torch.zeros(0, 4), double=torch.linspace(0, 1, 7, dtype=torch.float64),
        int8=torch.arange(-3, 3, dtype=torch.int8))
    path = tmp_path / "state.pth"
    torch.save(state, path)

    weights = network_weights(read_checkpoint(path))

    assert list(weights) == list(state)
    for name, tensor in state.items():
        assert weights[name].shape == tuple(tensor.shape), name
        assert np.array_equal(weights[name], _as_numpy(tensor)), name
    assert weights["half"].dtype == np.float16 and weights["bf16"].dtype == np.float32
    assert weights["long"].dtype == np.int64 and weights["flag"].dtype == np.bool_
    assert not weights["weight"].flags.writeable


def test_shared_storages_are_read_once_and_offsets_honoured(tmp_path: Path) -> None:
    torch = _torch()
    base = torch.arange(24, dtype=torch.float32)
    path = tmp_path / "shared.pth"
    torch.save({"a": base[4:10], "b": base.view(4, 6)[:, 1], "c": base}, path)

    checkpoint = read_checkpoint(path)

    found = dict(tensors(checkpoint))
    assert len(checkpoint.storages) == 1 and found["a"].offset == 4
    arrays = read_tensors(checkpoint, found)
    assert np.array_equal(arrays["a"], np.arange(4, 10)) and np.array_equal(arrays["b"], [1, 7, 13, 19])
    assert np.array_equal(arrays["c"], np.arange(24))


def _nnunet_like(torch):  # type: ignore[no-untyped-def]
    network = torch.nn.Sequential(torch.nn.Conv3d(1, 4, 3), torch.nn.InstanceNorm3d(4, affine=True),
                                  torch.nn.Conv3d(4, 2, 1))
    optimizer = torch.optim.SGD(network.parameters(), lr=0.01, momentum=0.99, nesterov=True)
    network(torch.ones(1, 1, 4, 4, 4)).sum().backward()
    optimizer.step()
    plans = {"configurations": {"3d_fullres": {"patch_size": [4, 4, 4], "spacing": [2.5, 0.8, 0.8],
                                               "architecture": {"network_class_name": "PlainConvUNet",
                                                                "arch_kwargs": {"n_stages": 2}}}},
             "transpose_forward": [0, 1, 2]}
    return network, {
        "network_weights": network.state_dict(),
        "optimizer_state": optimizer.state_dict(),
        "grad_scaler_state": None,
        "logging": {"mean_fg_dice": [np.float64(0.5), np.float64(0.75)], "ema_fg_dice": [np.float32(0.5)],
                    "dice_per_class_or_region": [[0.25, np.float64(0.5)]], "train_losses": [np.float64(-0.1)],
                    "lrs": [0.01, 0.0099], "epoch_start_timestamps": [1.7e9]},
        "_best_ema": np.float64(0.75),
        "current_epoch": 2,
        "init_args": {"plans": plans, "configuration": "3d_fullres", "fold": 0,
                      "dataset_json": {"labels": {"background": 0, "liver": 1}}, "device": torch.device("cuda", 0)},
        "trainer_name": "nnUNetTrainer",
        "inference_allowed_mirroring_axes": (0, 1, 2),
    }


def test_an_nnunet_checkpoint_reads_with_its_plain_values(tmp_path: Path) -> None:
    torch = _torch()
    network, saved = _nnunet_like(torch)
    path = tmp_path / "checkpoint_final.pth"
    torch.save(saved, path)

    checkpoint = read_checkpoint(path)
    content = checkpoint.content

    assert isinstance(content, dict)
    assert content["init_args"]["device"] == "cuda:0" and content["init_args"]["fold"] == 0
    assert content["init_args"]["plans"] == saved["init_args"]["plans"]
    assert content["logging"]["mean_fg_dice"] == [0.5, 0.75] and content["_best_ema"] == 0.75
    assert content["logging"]["dice_per_class_or_region"] == [[0.25, 0.5]]
    assert content["inference_allowed_mirroring_axes"] == (0, 1, 2) and content["trainer_name"] == "nnUNetTrainer"
    weights = network_weights(checkpoint)
    assert list(weights) == list(network.state_dict())
    for name, tensor in network.state_dict().items():
        assert np.array_equal(weights[name], _as_numpy(tensor)), name
    momentum = content["optimizer_state"]["state"][0]["momentum_buffer"]
    assert isinstance(momentum, TensorRef)
    read = read_tensors(checkpoint, {"m": momentum})["m"]
    assert np.array_equal(read, _as_numpy(saved["optimizer_state"]["state"][0]["momentum_buffer"]))


def test_parameters_and_sizes_rebuild_as_arrays_and_tuples(tmp_path: Path) -> None:
    torch = _torch()
    path = tmp_path / "parameter.pth"
    torch.save({"p": torch.nn.Parameter(torch.ones(2, 3)), "size": torch.Size([2, 3]), "dtype": torch.float16},
               path)

    checkpoint = read_checkpoint(path)

    assert isinstance(checkpoint.content, dict) and checkpoint.content["size"] == (2, 3)
    assert checkpoint.content["dtype"] == "torch.float16"
    assert np.array_equal(read_tensors(checkpoint, {"p": checkpoint.content["p"]})["p"], np.ones((2, 3)))


# --- refused in one line, nothing run ------------------------------------------------------------------------

class _System:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return os.system, (f"touch {self.marker}",)


class _Eval:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return eval, (f"open({str(self.marker)!r}, 'w').close()",)


@pytest.mark.parametrize(("payload", "named", "protocol"), [
    (_System, f"'{os.system.__module__}.system'", 2), (_Eval, ".eval'", 2),
    (_System, f"'{os.system.__module__}.system'", 4), (_Eval, "'builtins.eval'", 5)])
def test_a_pickle_that_calls_code_is_refused_and_nothing_runs(tmp_path: Path, payload: type, named: str,
                                                             protocol: int) -> None:
    marker = tmp_path / "ran"
    data = pickle.dumps({"network_weights": {}, "x": payload(marker)}, protocol=protocol)
    path = _zip(tmp_path / "checkpoint_final.pth", data)

    with pytest.raises(ModelError) as caught:
        read_checkpoint(path)

    message = str(caught.value)
    assert named in message and str(path) in message and "\n" not in message
    assert not marker.exists()


def test_a_torch_saved_payload_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    torch = _torch()
    marker = tmp_path / "ran"
    path = tmp_path / "checkpoint_best.pth"
    torch.save({"network_weights": {"w": torch.ones(2)}, "x": _System(marker)}, path)

    with pytest.raises(ModelError, match=r"checkpoint_best\.pth: refused: the pickle asks for the global"):
        read_checkpoint(path)
    assert not marker.exists()


@pytest.mark.parametrize(("pickled", "said"), [
    (b"\x80\x02cnumpy\ndtype\nX\x01\x00\x00\x00O\x89\x88\x87R.", "type 'O'"),  # object arrays hold pickles
    (b"\x80\x02ccollections\nOrderedDict\nX\x01\x00\x00\x00a\x85R.", "OrderedDict built from arguments"),
    (b"\x80\x02ccollections\nOrderedDict\n.", "'OrderedDict' as a value"),
    (b"\x80\x02]}b.", "sets the state of a value of type list"),
    (b"\x80\x02(cos\nsystem\nX\x02\x00\x00\x00idi.", "global 'os.system'"),
    (b"(S'x'\nl.", "pickle opcode"),  # protocol 0's STRING and INST are not what torch.save writes
    (b"\x80\x02X\x01\x00\x00\x00a)R.", "calls a value of type str"),
])
def test_what_a_checkpoint_never_holds_is_refused(tmp_path: Path, pickled: bytes, said: str) -> None:
    path = _zip(tmp_path / "odd.pth", pickled)

    with pytest.raises(ModelError, match="odd.pth") as caught:
        read_checkpoint(path)

    assert said in str(caught.value)


def test_a_storage_shorter_than_its_tensors_is_refused(tmp_path: Path) -> None:
    path = _zip(tmp_path / "short.pth", _storage_pickle(12, (3, 4), (4, 1)), {"0": b"\0" * 40})

    with pytest.raises(ModelError, match=r"short\.pth: tensor storage '0' holds 40 bytes; its tensors declare 48"):
        read_checkpoint(path)


def test_a_huge_declared_storage_is_refused_before_allocating(tmp_path: Path) -> None:
    path = _zip(tmp_path / "huge.pth", _storage_pickle(1 << 50, (1 << 25, 1 << 25), (1 << 25, 1)),
                {"0": b"\0" * 48})

    with pytest.raises(ModelError, match=r"huge\.pth: tensor storage '0' holds 48 bytes"):
        read_checkpoint(path)


@pytest.mark.parametrize(("shape", "stride", "offset"), [((1 << 40,), (1,), 0), ((3, 4), (4, 1), 1),
                                                         ((2, 2), (100, 1), 0)])
def test_a_tensor_past_the_end_of_its_storage_is_refused(tmp_path: Path, shape: tuple[int, ...],
                                                         stride: tuple[int, ...], offset: int) -> None:
    path = _zip(tmp_path / "past.pth", _storage_pickle(12, shape, stride, offset), {"0": b"\0" * 48})

    with pytest.raises(ModelError, match=r"past\.pth: refused: a tensor of shape .* past the end of its storage"):
        read_checkpoint(path)


@pytest.mark.parametrize(("shape", "stride"), [((1, 3), (10**30, 1)), ((0, 10**30), (1, 1))])
def test_a_tensor_of_absurd_strides_or_sizes_is_refused(tmp_path: Path, shape: tuple[int, ...],
                                                        stride: tuple[int, ...]) -> None:
    # within its storage by the bounds alone (a size-1 or a size-0 axis), but no numpy view can be made of it
    path = _zip(tmp_path / "absurd.pth", _storage_pickle(12, shape, stride), {"0": b"\0" * 48})

    with pytest.raises(ModelError, match=r"absurd\.pth: refused: a malformed tensor"):
        network_weights(read_checkpoint(path))


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    depth = 10_000
    path = _zip(tmp_path / "deep.pth", b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b".")

    with pytest.raises(ModelError, match=rf"deep\.pth: refused: a pickle nested deeper than {MAX_DEPTH} levels"):
        read_checkpoint(path)


def test_a_small_pickle_of_exponentially_many_entries_is_refused(tmp_path: Path) -> None:
    levels = 60  # each list holds the one before twice: 2^60 entries to whoever walks it
    body = b"]q\x00" + b"".join(b"(h" + bytes([i]) + b"h" + bytes([i]) + b"lq" + bytes([i + 1]) for i in range(levels))
    path = _zip(tmp_path / "bomb.pth", b"\x80\x02" + body + b".")

    with pytest.raises(ModelError, match=rf"bomb\.pth: refused: a pickle of over {MAX_ENTRIES} entries"):
        read_checkpoint(path)


def test_a_pickle_of_millions_of_tiny_values_is_refused_while_it_is_read(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # two bytes a tuple, nested: 40 MB of pickle would be 20 M tuples (a GB) before any walk of the content; the
    # bound is lowered here to keep the test short
    monkeypatch.setattr(checkpoint_pickle, "MAX_VALUES", 1_000)
    path = _zip(tmp_path / "many.pth", b"\x80\x02N" + b"\x85" * 1_001 + b".")

    with pytest.raises(ModelError, match=r"many\.pth: refused: a pickle of over 1000 values"):
        read_checkpoint(path)


def test_a_pickle_that_contains_itself_is_refused(tmp_path: Path) -> None:
    path = _zip(tmp_path / "cycle.pth", b"\x80\x02]q\x00h\x00a.")

    with pytest.raises(ModelError, match=r"cycle\.pth: refused: a pickle that contains itself"):
        read_checkpoint(path)


def test_not_a_zip_truncated_and_old_formats_are_one_line(tmp_path: Path) -> None:
    torch = _torch()
    whole = tmp_path / "whole.pth"
    torch.save({"w": torch.ones(1000)}, whole)
    cut = tmp_path / "cut.pth"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    old = tmp_path / "old.pth"
    torch.save({"w": torch.ones(3)}, old, _use_new_zipfile_serialization=False)
    text = tmp_path / "text.pth"
    text.write_text("not a checkpoint\n")

    for path, said in ((cut, "a truncated or damaged zip archive"), (text, "not a PyTorch checkpoint"),
                       (old, "an old PyTorch format (before 1.6); re-save it with torch >= 1.6")):
        with pytest.raises(ModelError) as caught:
            read_checkpoint(path)
        assert str(caught.value).startswith(f"{path}: {said}")


def test_a_storage_cut_short_inside_the_file_is_refused(tmp_path: Path) -> None:
    path = _zip(tmp_path / "cut.pth", _storage_pickle(12, (3, 4), (4, 1)), {"0": b"\1" * 48})
    data = path.read_bytes()
    start = data.index(b"\1" * 48)  # the storage's bytes, then the zip's directory: cut the file right after them
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert archive.getinfo("archive/data/0").file_size == 48
    path.write_bytes(data[: start + 20] + data[start + 48:])  # 28 bytes gone: the directory now points past the end

    with pytest.raises(ModelError, match=r"cut\.pth: "):
        read_checkpoint(path)


def test_a_torchscript_archive_is_not_a_checkpoint(tmp_path: Path) -> None:
    torch = _torch()
    path = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), path)

    with pytest.raises(ModelError, match=r"model\.pt: a TorchScript archive"):
        read_checkpoint(path)


def test_a_file_changed_after_reading_is_not_read_from(tmp_path: Path) -> None:
    torch = _torch()
    path = tmp_path / "state.pth"
    torch.save({"w": torch.ones(4)}, path)
    checkpoint = read_checkpoint(path)
    torch.save({"w": torch.zeros(4)}, tmp_path / "other.pth")
    os.replace(tmp_path / "other.pth", path)

    with pytest.raises(ModelError, match=r"state\.pth: the file changed since it was read"):
        network_weights(checkpoint)


def test_a_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoint_final.pth"
    folder.mkdir()

    with pytest.raises(ModelError, match=r"checkpoint_final\.pth: not a regular file: a folder"):
        read_checkpoint(folder)
