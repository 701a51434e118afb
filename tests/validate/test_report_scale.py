"""The certification report at pod scale: a synthetic 1,344-node result set built from the
simulated fabric (tests/helpers/synthetic_pod.py), written and then opened in a real headless
browser (Debian's chromium), which must run the page's script and draw it."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from podctl.validate.report import write_report
from tests.helpers.synthetic_pod import BAD_GPU, BROKEN, synthetic_pod

MAX_HTML_BYTES = 5 * 1024 * 1024


@pytest.fixture(scope="module")
def pod_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, object]:
    tmp = tmp_path_factory.mktemp("scale")
    cert, runs, meta = synthetic_pod(tmp)
    slow_leaf = meta.pop("_slow_leaf")
    paths = write_report(tmp / "report", cert, runs, meta)
    return paths["html"], {"slow_leaf": slow_leaf, "cert": cert}, paths


def test_the_page_is_small_and_says_what_failed_first(pod_report) -> None:
    page_path, facts, _ = pod_report
    page = page_path.read_text()
    assert page_path.stat().st_size < MAX_HTML_BYTES, page_path.stat().st_size
    cert = facts["cert"]
    assert len(cert.nodes) == 1344 and not cert.certified
    failed = page[page.index("<h2 id=failed>") : page.index("<h2 id=figures>")]
    # The switch first (it explains its nodes), then the nodes, the bad GPU's figure as evidence.
    assert failed.index(facts["slow_leaf"]) < failed.index(BAD_GPU[0])
    assert "gemm_bf16_tflops gpu3 (podctl): 471.2 TFLOP/s &lt; 714.4" in failed
    assert BROKEN in failed and "out of memory" in failed
    figures = page[page.index("<h2 id=figures>") : page.index("<h2 id=heatmap>")]
    assert f"{BAD_GPU[0]}/{BAD_GPU[1]} 471.2" in figures  # the outlier named
    assert figures.count("<svg") == 6  # one distribution per figure
    # Not a row per node and figure any more: the per-node detail is in the page's data.
    assert page.count("<tr>") < 300
    assert page.count("<option value=") == 1344


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return name
    pytest.fail("no chromium: make test installs it (.ci/consumers-setup.sh)")


def test_it_renders_in_a_real_browser(pod_report, tmp_path: Path) -> None:
    page, facts, _ = pod_report
    browser = [_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--virtual-time-budget=10000"]  # fmt: skip
    started = time.monotonic()
    dom = subprocess.run([*browser, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    # The script ran to its end over all 1,344 nodes (it marks the body last).
    assert re.search(r'<body data-rendered="1344"', dom.stdout), dom.stderr[-2000:]
    print(f"chromium loaded and ran the 1,344-node report in {took:.1f} s")
    shot = tmp_path / "shot.png"
    subprocess.run([*browser, "--window-size=1400,2600", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)  # fmt: skip
    import matplotlib.image as mpimg

    pixels = mpimg.imread(str(shot))
    assert pixels.shape[0] == 2600 and pixels.shape[1] == 1400
    red = ((pixels[..., 0] > 0.85) & (pixels[..., 1] < 0.3) & (pixels[..., 2] < 0.35)).sum()
    green = ((pixels[..., 1] > 0.7) & (pixels[..., 0] < 0.6) & (pixels[..., 2] < 0.7)).sum()
    # Red: the verdict, the failing rows, the slow unit's stripe; green: the heat map's healthy cells.
    assert red > 5000 and green > 100_000, (red, green)
