# Report categories (the paper's sections; captions in workflow/report/) and the helpers
# report.smk's rules use. Nothing here runs a job.
SHIFT_SECTION = "Section 5.2 - covariate shift detection"
ABLATION_SECTION = "Section 5.3 - ablation of DGP"
CALIBRATION_SECTION = "Appendix - calibration"
BEYOND_SECTION = "Beyond the paper - new shifts and CNNs"
COMPARISON_SECTION = "Table 1 - published vs reproduced"
COMPARISON_PAPER_SECTION = "Published vs reproduced - the other tables"

# What this configuration computes: a table or figure it does not is still written (with a
# note, so the rules' outputs stay fixed) but left out of the report: no placeholder sections.
_PAPER_SHIFTS = {"GB", "GN", "PD", "UN"}
_MLP, _CNN = "mlp" in KINDS, "cnn" in KINDS
COMPUTES = {
    "table1": _MLP and bool(_PAPER_SHIFTS & set(CORRUPTIONS)),
    "ablation": _MLP and bool(ABLATION) and bool(_PAPER_SHIFTS & set(CORRUPTIONS)),
    "calibration": _MLP,
    "gn": _MLP and "GN" in CORRUPTIONS,
    "beyond_shifts": _MLP and bool({"RO", "ZO", "TR", "SH"} & set(CORRUPTIONS) or LABEL_SHIFT),
    "cnn": _CNN,
    # the shipped Table 1 covers MNIST, Fashion-MNIST and CIFAR-10; another one: assume so
    "comparison": bool(published_table1())
    or bool({"mnist", "fashion-mnist", "cifar10"} & set(config["datasets"])),
}
COMPUTES["beyond_figure"] = COMPUTES["beyond_shifts"] or _CNN


def in_report(path, caption, section, computes, subcategory=None):
    """``path`` as an item of the report when this configuration computes it."""
    if not computes:
        return path
    return report(path, caption=caption, category=section, subcategory=subcategory)


def table_files(stem, section, computes):
    """A table's outputs: in the report (when computed) its HTML rendering in the paper's
    layout and its CSV as a download; the Markdown and LaTeX files beside them."""
    path = f"{RESULTS}/tables/{stem}"
    caption = f"../report/{stem}.rst"
    html, csv = f"{path}.html", f"{path}.csv"
    html = in_report(html, caption, section, computes, "Tables")
    csv = in_report(csv, caption, section, computes, "CSV downloads")
    return [csv, f"{path}.md", f"{path}.tex", html]


def figure_files(stem, section, computes):
    """A figure's PNG (in the report when computed) and PDF."""
    png = in_report(
        f"{RESULTS}/figures/{stem}.png", f"../report/{stem}.rst", section, computes, "Figures"
    )
    return [png, f"{RESULTS}/figures/{stem}.pdf"]
