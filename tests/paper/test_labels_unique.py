"""Display labels never confuse two methods or data sets; published tables match by meaning."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
from _workflow import tiny_config
from test_comparison import _published, _records

from dgpbench.cli.config import check_config
from dgpbench.labels import METHOD_LABELS, check_unique_labels, dataset_label, method_label
from dgpbench.paper.comparisons.table1 import (
    load_published_table,
    reproduced_cells,
    write_comparisons,
)
from dgpbench.paper.reporting import _labelled


@pytest.mark.parametrize("builtin", sorted(METHOD_LABELS))
def test_a_custom_method_never_takes_a_builtin_label(builtin):
    for name in (METHOD_LABELS[builtin], builtin, METHOD_LABELS[builtin].lower()):
        if not name.isidentifier():
            continue
        custom = f"my_mod:{name}"
        assert method_label(custom) not in METHOD_LABELS.values()
        check_unique_labels([*METHOD_LABELS, custom], "method")


def test_an_npz_named_like_a_builtin_data_set_gets_its_own_label():
    assert dataset_label("npz:/data/MNIST.npz") == "MNIST (npz)"
    assert dataset_label("npz-mnist") == "mnist (npz)"
    check_unique_labels(["mnist", "npz:/data/MNIST.npz"], "dataset")


@pytest.mark.parametrize(
    ("key", "names", "message"),
    [
        ("methods", ["a.m:Feats", "b.m:Feats"], "methods 'a.m:Feats' and 'b.m:Feats'"),
        ("datasets", ["npz:/a/x.npz", "npz:/b/x.npz"], "datasets 'npz:/a/x.npz' and"),
    ],
)
def test_config_refuses_two_entries_with_one_label_naming_both(key, names, message):
    config = copy.deepcopy(tiny_config())
    config[key] = names
    if key == "datasets":
        config["ablation"]["datasets"] = ["none"]
    with pytest.raises(ValueError, match="invalid configuration") as exc:
        check_config(config)
    assert message in str(exc.value)


def test_tables_label_dgp_and_a_custom_dgp_apart():
    cells = pd.DataFrame(
        {"method": ["dgp", "my_mod:DGP"], "dataset": ["mnist", "npz:/d/MNIST.npz"]}
    )
    out = _labelled(cells)  # raised "Categorical categories must be unique" before
    assert sorted(out["Method"].astype(str)) == ["DGP", "DGP (my_mod)"]
    assert sorted(out["Dataset"].astype(str)) == ["MNIST", "MNIST (npz)"]
    with pytest.raises(ValueError, match="share the label 'F'"):
        _labelled(pd.DataFrame({"method": ["a:F", "b:F"]}))


def test_a_custom_method_is_never_compared_with_a_published_row():
    records = _records()
    custom = records[records["method"] == "dgp"].assign(method="my_mod:DGP")
    cells = reproduced_cells(pd.concat([records, custom]), deltas=[0.5, 1.0])
    assert set(cells["method"]) == {"Softmax", "TU", "DGP"}
    assert len(cells) == 12


@pytest.mark.parametrize("spell", [str.lower, lambda s: f" {s} ", str.upper])
def test_published_labels_are_normalised(tmp_path, spell):
    path = tmp_path / "published.csv"
    table = _published()
    for col in ("dataset", "method", "corruption"):
        table[col] = table[col].map(spell)
    table.to_csv(path, index=False)
    loaded = load_published_table(path)
    assert set(loaded["method"]) == {"Softmax", "TU", "DGP", "MAGDiff"}
    assert set(loaded["dataset"]) == {"Digits", "MNIST"}
    summary = write_comparisons(_records(), tmp_path / "out", pool_deltas=[0.5, 1.0],
                                published_path=path)  # fmt: skip
    assert summary["n_cells"].sum() == 12


def test_a_published_table_matching_nothing_is_refused(tmp_path):
    path = tmp_path / "published.csv"
    _published().assign(method="Dee Gee Pee").drop_duplicates(
        ["dataset", "corruption", "n", "method"]
    ).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"published\.csv matches no cell this run computed"):
        write_comparisons(_records(), tmp_path / "out", pool_deltas=[0.5, 1.0], published_path=path)
    assert not (tmp_path / "out").exists()


def test_an_empty_published_csv_is_named(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("")
    with pytest.raises(ValueError, match=r"published table .*empty\.csv is empty"):
        load_published_table(path)
