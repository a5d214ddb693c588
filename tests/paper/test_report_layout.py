"""What a reader of the report sees: tables in the paper's layout (HTML with bold best and
stars), one placeholder wording, and the figure fixes (panel titles, visible Wilson bands,
a calibration axis zoomed on the region of alpha)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import PolyCollection
from test_reporting import RATES, _records

from dgpbench.labels import NOT_COMPUTED
from dgpbench.paper import reporting


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """``draw(alpha)``: the figures that reporting saves for RATES' records (TU and DGP) at
    level ``alpha``, by file stem, drawn once per ``alpha`` and kept open for inspection."""
    cache = {}

    def draw(alpha: float = 0.05) -> dict:
        if alpha not in cache:
            figures = cache[alpha] = {}

            def save(fig, stem, **kwargs):
                figures[stem.name] = fig
                return []

            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(reporting, "save_figure", save)
                patch.setattr(plt, "close", lambda *a, **k: None)
                folder = tmp_path_factory.mktemp("figures")
                reporting.figures(_records(RATES), folder, methods=["tu", "dgp"], alpha=alpha)
        return cache[alpha]

    yield draw
    plt.close("all")


def test_table1_html_has_bold_best_and_stars_in_the_papers_layout(tmp_path):
    cells = reporting.main_table(_records(RATES), tmp_path)
    html = (tmp_path / "table1_shift_detection.html").read_text()
    assert html.startswith("<h3>Covariate shift detection ratio (%)")
    best = cells[cells["best"]]
    assert html.count("<b>") == len(best) > 0
    starred = cells[cells["star"]]
    assert html.count("*</td>") == len(starred) > 0
    # the layout: corruptions across, n x method down, as in the paper's Table 1
    assert ">GN<" in html and ">PD<" in html and ">Softmax<" in html


def test_ablation_table_header_names_n(tmp_path):
    reporting.ablation_tables(_records(RATES), tmp_path, ["mnist"], ns_main=[10, 20])
    header = (tmp_path / "table2_ablation.md").read_text().splitlines()[2]
    assert "n = 10 / GN" in header and "n = 20 / PD" in header
    assert r"n = 10" in (tmp_path / "table2_ablation.tex").read_text()


def test_placeholders_share_one_wording(tmp_path, drawn):
    records = _records(RATES)
    reporting.ablation_tables(records, tmp_path, [])
    reporting.beyond_tables(records, tmp_path)
    for stem in ("table2_ablation", "table_beyond_shifts", "table_cnn", "table_cnn_calibration"):
        for ext in (".csv", ".md", ".tex", ".html"):
            assert f"{NOT_COMPUTED}. No " in (tmp_path / f"{stem}{ext}").read_text(), stem
    text = drawn()["fig_beyond"].axes[0].texts[0].get_text()
    assert text.startswith(f"{NOT_COMPUTED}. No ")


def test_by_delta_panels_are_titled_once_and_bands_are_visible(drawn):
    fig = drawn()["fig_gn_by_delta"]
    titles = [t.get_text() for ax in fig.axes for t in [ax.title, *ax.texts] if t.get_text()]
    assert "δ = 0.25" in titles and "δ = 0.5" in titles
    assert not any("delta" in t for t in titles)
    bands = [c for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection)]
    assert bands and all(b.get_alpha() >= 0.3 for b in bands)


@pytest.mark.parametrize(("alpha", "top"), [(0.05, 0.2), (0.2, 0.4)])
def test_calibration_axis_zooms_on_alpha(drawn, alpha, top):
    axes = drawn(alpha)["fig_calibration"].axes
    labels = [t.get_text() for ax in axes for t in ax.get_xticklabels()]  # bottom row only
    assert any(label.endswith(f"= {alpha:g}") for label in labels)
    for ax in axes:
        assert ax.get_xlim() == pytest.approx((0, top)) and ax.get_ylim() == pytest.approx((0, top))
        assert alpha in ax.get_xticks()
        marks = [line for line in ax.lines if list(line.get_xdata()) == [alpha, alpha]]
        assert marks, "alpha is not marked"
