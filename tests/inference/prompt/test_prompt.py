"""Contract tests of the prompt-model adapter on SAM and SAM2 pairs built here with the public exports' names,
shapes and dtypes (tests/prompt_pairs.py): the coordinate transform, masks at image size aligned to the
pixel, one encoder run per image, the embeddings LRU by bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prompt_pairs import sam2_pair, sam_pair

from app.inference.prompt.cache import Embedding, EmbeddingCache
from app.inference.prompt.frame import FrameGeometry, encoder_tensor, frame_geometry, frame_points
from app.inference.prompt.model import Box, Point, PromptSession, load_prompt_spec, open_prompt_session

RADIUS = 40.0  # frame pixels


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pairs")
    return {"sam": sam_pair(folder, radius=RADIUS), "sam2": sam2_pair(folder, radius=RADIUS)}


@pytest.fixture(scope="module")
def sessions(pairs: dict[str, Path]) -> dict[str, PromptSession]:
    return {layout: open_prompt_session(load_prompt_spec(path), "cpu") for layout, path in pairs.items()}


def test_layouts_recognised_from_the_decoder_names(pairs: dict[str, Path]) -> None:
    sam, sam2 = load_prompt_spec(pairs["sam"]), load_prompt_spec(pairs["sam2"])
    assert (sam.layout, sam.sources["layout"]) == ("sam", "graph")
    assert (sam2.layout, sam2.input_size, sam2.sources["input_size"]) == ("sam2", 1024, "graph")
    assert sam2.embed_outputs == ("high_res_feats_0", "high_res_feats_1", "image_embed")
    assert sam.mean == (123.675, 116.28, 103.53) and sam.sources["mean"] == "default"


@pytest.mark.parametrize(("hw", "resized"), [((300, 500), (614, 1024)), ((500, 300), (1024, 614)),
                                               ((1024, 1024), (1024, 1024)), ((2000, 1000), (1024, 512)),
                                               ((333, 1000), (341, 1024))])  # 340.992: rounded half up
def test_longest_side_to_the_frame_as_resize_longest_side(hw: tuple[int, int], resized: tuple[int, int]) -> None:
    assert frame_geometry(hw, 1024).resized_hw == resized  # int(side · 1024 / longest + 0.5)


def test_points_scaled_per_axis_as_apply_coords() -> None:
    geometry = frame_geometry((300, 500), 1024)
    np.testing.assert_allclose(frame_points(np.array([[100.0, 200.0], [0, 0]]), geometry),
                               [[100 * 1024 / 500, 200 * 614 / 300], [0, 0]], rtol=1e-6)
    stretched = frame_geometry((300, 500), 1024, resize="stretch")
    np.testing.assert_allclose(frame_points(np.array([[100.0, 200.0]]), stretched), [[204.8, 200 * 1024 / 300]])


def test_encoder_tensor_normalised_and_padded_bottom_right() -> None:
    image = np.full((300, 500, 3), (123, 116, 104), np.uint8)
    image[:, :, 0] = 255
    tensor = encoder_tensor(image, frame_geometry((300, 500), 1024), mean=(123.675, 116.28, 103.53),
                            std=(58.395, 57.12, 57.375))
    assert tensor.shape == (1, 3, 1024, 1024) and tensor.dtype == np.float32
    np.testing.assert_allclose(tensor[0, 0, :614, :], (255 - 123.675) / 58.395, rtol=1e-5)
    assert np.all(tensor[0, :, 614:, :] == 0)  # SAM pads the normalised image with zeros


@pytest.mark.parametrize("layout", ["sam", "sam2"])
# landscape and portrait: the padding on either side; 333 → 340.992 frame pixels: the rounding half up matters
@pytest.mark.parametrize("hw", [(300, 500), (500, 300), (333, 1000)])
@pytest.mark.parametrize("xy", [(100, 200), (37, 41)])
def test_a_click_reaches_the_decoder_at_its_frame_coordinate_and_the_mask_comes_back_under_it(
        sessions: dict[str, PromptSession], layout: str, hw: tuple[int, int], xy: tuple[int, int]) -> None:
    h, w = hw
    x, y = xy
    session = sessions[layout]
    embedding = session.embed(np.zeros((h, w, 3), np.uint8), key=("blank", hw))
    proposal = session.decode(embedding, [Point(x, y)])
    scale = 1024 / max(h, w)
    new_w, new_h = int(w * scale + 0.5), int(h * scale + 0.5)
    fed = session.last_feed
    np.testing.assert_allclose(fed["point_coords"][0, 0], [x * new_w / w, y * new_h / h], rtol=1e-6)
    if layout == "sam":  # SamOnnxModel: a padding point (0, 0) labelled -1 without a box; orig_im_size is H, W
        np.testing.assert_array_equal(fed["point_labels"], [[1, -1]])
        np.testing.assert_array_equal(fed["point_coords"][0, 1], [0, 0])
        np.testing.assert_array_equal(fed["orig_im_size"], [h, w])
    else:  # samexporter's SAM2 decoder adds its own padding point
        np.testing.assert_array_equal(fed["point_labels"], [[1]])
    assert fed["has_mask_input"].tolist() == [0.0] and fed["mask_input"].shape == (1, 1, 256, 256)
    assert proposal.mask.shape == (h, w) and proposal.mask.dtype == bool
    ys, xs = np.nonzero(proposal.mask)
    assert abs(xs.mean() - x) <= 0.5 and abs(ys.mean() - y) <= 0.5  # aligned to the pixel
    radius = RADIUS / scale  # the disc's radius in image pixels
    assert proposal.mask[y, x] and abs((xs.max() - xs.min() + 1) / 2 - radius) <= 1.5
    assert proposal.iou == pytest.approx(0.9 if layout == "sam2" else 0.8)  # SAM2: the best of three by IoU
    assert proposal.low_res.shape == (256, 256)


@pytest.mark.parametrize("layout", ["sam", "sam2"])
def test_a_box_is_two_corner_points_labelled_2_and_3_without_padding(
        sessions: dict[str, PromptSession], layout: str) -> None:
    session = sessions[layout]
    embedding = session.embed(np.zeros((400, 800), np.uint8))
    session.decode(embedding, [Point(300, 100, 0)], box=Box(100, 50, 500, 350))
    np.testing.assert_array_equal(session.last_feed["point_labels"], [[0, 2, 3]])
    np.testing.assert_allclose(session.last_feed["point_coords"][0], [[384, 128], [128, 64], [640, 448]])


def test_mask_input_fed_back_with_has_mask_input(sessions: dict[str, PromptSession]) -> None:
    session = sessions["sam2"]
    embedding = session.embed(np.zeros((256, 256, 3), np.uint8))
    first = session.decode(embedding, [Point(128, 128)])
    session.decode(embedding, [Point(128, 128), Point(10, 10, 0)], mask_input=first.low_res)
    assert session.last_feed["has_mask_input"].tolist() == [1.0]
    np.testing.assert_array_equal(session.last_feed["mask_input"][0, 0], first.low_res)


class CountingSession:
    """The real ORT session, its runs counted (a hand-written wrapper, not a mock)."""

    def __init__(self, session: Any) -> None:
        self.session, self.runs = session, 0

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> Any:
        self.runs += 1
        return self.session.run(names, feed)

    def get_inputs(self) -> Any:
        return self.session.get_inputs()


@pytest.mark.parametrize("layout", ["sam", "sam2"])
def test_the_encoder_runs_once_per_image_however_many_prompts(
        sessions: dict[str, PromptSession], layout: str) -> None:
    base = sessions[layout]
    encoder, decoder = CountingSession(base._encoder), CountingSession(base._decoder)
    session = PromptSession(base.spec, encoder, decoder, info=base.info, decoder_info=base.decoder_info)
    images = [np.full((120, 160, 3), value, np.uint8) for value in (10, 20)]
    for _round in range(3):
        for image in images:  # back and forth between two images, five prompts each
            for x in range(5):
                session.decode(session.embed(image), [Point(20 + x * 10, 60)])
    assert encoder.runs == 2 == session.encoder_runs
    assert decoder.runs == 30


def _embedding(key: str, nbytes: int) -> Embedding:
    return Embedding((key,), {"image_embed": np.zeros(nbytes // 4, np.float32)}, FrameGeometry((1, 1), 1024, (1, 1)))


def test_the_embeddings_cache_drops_least_recently_used_by_bytes() -> None:
    cache = EmbeddingCache(max_bytes=1000)
    for key in "abc":
        cache.put(_embedding(key, 400))
    assert ("a",) not in cache and cache.nbytes == 800  # a third 400-byte embedding pushed the oldest out
    assert cache.get(("b",)) is not None  # b is now the most recent
    cache.put(_embedding("d", 600))  # 1400 bytes: c goes (least recently used), b stays
    assert [k for k in "bcd" if (k,) in cache] == ["b", "d"] and cache.nbytes == 1000
    cache.put(_embedding("e", 200))  # b is now the least recent
    assert [k for k in "bde" if (k,) in cache] == ["d", "e"] and cache.nbytes == 800
    cache.put(_embedding("huge", 4000))  # larger than the whole budget: not kept, nothing else dropped
    assert ("huge",) not in cache and len(cache) == 2 and cache.nbytes == 800


def test_cache_keyed_by_model_too(pairs: dict[str, Path]) -> None:
    shared = EmbeddingCache()
    one = open_prompt_session(load_prompt_spec(pairs["sam"]), "cpu", cache=shared)
    two = open_prompt_session(load_prompt_spec(pairs["sam2"]), "cpu", cache=shared)
    image = np.zeros((64, 64), np.uint8)
    one.embed(image, key="slide-1")
    two.embed(image, key="slide-1")
    assert (one.encoder_runs, two.encoder_runs, len(shared)) == (1, 1, 2)
    assert one.cached("slide-1") and not one.cached("slide-2")  # what a prefetch of the next image asks


def test_a_cpu_session_says_where_it_runs(sessions: dict[str, PromptSession]) -> None:
    info = sessions["sam2"].info
    assert info.provider == "CPUExecutionProvider" and info.requested == "cpu" and info.fallback_reason is None


def test_stretch_as_samexporters_sam2_inference(tmp_path: Path) -> None:
    """resize: stretch — the image to 1024×1024 whatever its aspect, points × 1024 / side, masks back the same."""
    session = open_prompt_session(load_prompt_spec(sam2_pair(tmp_path, extra="  resize: stretch\n")), "cpu")
    embedding = session.embed(np.zeros((256, 512), np.uint8))
    proposal = session.decode(embedding, [Point(300, 100)])
    np.testing.assert_allclose(session.last_feed["point_coords"][0, 0], [600, 400])
    ys, xs = np.nonzero(proposal.mask)
    assert abs(xs.mean() - 300) <= 0.5 and abs(ys.mean() - 100) <= 0.5
    assert abs((xs.max() - xs.min() + 1) - 2 * RADIUS / 2) <= 2 and abs((ys.max() - ys.min() + 1) - 2 * RADIUS / 4) <= 2


def test_grabcut_segments_the_object_in_the_box_and_takes_points_as_seeds() -> None:
    from app.inference.prompt.grabcut import GrabCutSession

    image = np.full((120, 160, 3), 40, np.uint8)
    image[30:90, 50:110] = (230, 200, 60)
    truth = np.zeros((120, 160), bool)
    truth[30:90, 50:110] = True
    grabcut = GrabCutSession()
    embedding = grabcut.embed(image)
    proposal = grabcut.decode(embedding, box=Box(40, 20, 120, 100))
    assert (proposal.mask & truth).sum() / (proposal.mask | truth).sum() >= 0.95
    assert np.isnan(proposal.iou) and proposal.low_res.shape == (256, 256)
    seeded = grabcut.decode(embedding, [Point(80, 60, 0)], box=Box(40, 20, 120, 100))
    assert not seeded.mask[60, 80]  # a negative point is sure background


def test_grabcut_works_around_the_box_and_refuses_a_box_over_the_whole_image() -> None:
    from app.inference.prompt.grabcut import GrabCutSession
    from app.inference.prompt.request import PromptError

    image = np.full((1500, 2000, 3), 40, np.uint8)
    image[1000:1060, 1500:1560] = (230, 200, 60)
    image[100:400, 100:400] = (230, 200, 60)  # a look-alike far from the box: outside its margin, never found
    grabcut = GrabCutSession()
    embedding = grabcut.embed(image)
    proposal = grabcut.decode(embedding, box=Box(1490, 990, 1570, 1070))
    assert proposal.mask.shape == (1500, 2000) and proposal.mask[1000:1060, 1500:1560].mean() >= 0.95
    assert proposal.mask.sum() <= 60 * 60 * 1.1 and not proposal.mask[100:400, 100:400].any()
    small = grabcut.embed(image[:50, :60])
    with pytest.raises(PromptError) as caught:
        grabcut.decode(small, box=Box(0, 0, 60, 50))
    assert str(caught.value) == ("grabcut: the box (0, 0, 60, 50) leaves no background to learn from (it covers the "
                                 "whole image)")


@pytest.mark.parametrize("layout", ["sam", "sam2"])
def test_a_one_pixel_thin_image_keeps_a_row_in_the_frame(sessions: dict[str, PromptSession], layout: str) -> None:
    assert frame_geometry((1, 5000), 1024).resized_hw == (1, 1024)  # int(0.2048 + 0.5) = 0: cv2.resize's assertion
    session = sessions[layout]
    proposal = session.decode(session.embed(np.full((1, 5000), 90, np.uint8)), [Point(2500, 0)])
    assert proposal.mask.shape == (1, 5000) and proposal.mask[0, 2500]


def test_grabcut_on_a_one_pixel_thin_image() -> None:
    from app.inference.prompt.grabcut import GrabCutSession

    grabcut = GrabCutSession()
    proposal = grabcut.decode(grabcut.embed(np.full((1, 5000), 90, np.uint8)), box=Box(100, 0, 400, 1))
    assert proposal.mask.shape == (1, 5000) and proposal.low_res.shape == (256, 256)


def test_what_the_faces_ask_of_either_prompt_model_is_a_member(pairs: dict[str, Path]) -> None:
    from app.inference.prompt.grabcut import GrabCutSession
    from app.inference.prompt.request import PromptAbout

    session = open_prompt_session(load_prompt_spec(pairs["sam"]), "cpu")
    session.warm_up()  # one encoder and decoder run on a blank picture, not counted as an image's
    assert (session.encoder_runs, session.decoder_runs, session.model_free) == (0, 0, False)
    assert session.about() == PromptAbout(session.spec.name, "CPU", session.info.fallback_reason or "")
    grabcut = GrabCutSession()
    grabcut.warm_up()
    assert grabcut.model_free and grabcut.about() == PromptAbout("grabCut")
    image = np.zeros((32, 32, 3), np.uint8)
    assert grabcut.embed(image, key="a", run_options=object()).tensors["image"].shape == (32, 32, 3)
