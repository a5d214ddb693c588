# dgpbench workflow: train -> images/corrupt -> features -> detect/calibrate -> aggregate ->
# tables and figures. Configuration: config.yaml (validated against
# workflow/schemas/config.schema.yaml); the paper's grid: --configfile config/paper.yaml.
# Every rule calls one `dgpbench` subcommand, so each step also runs by hand.

from snakemake.utils import min_version

from dgpbench.cli.config import base_configfile

# The floor of pyproject.toml's snakemake requirement (tests/workflow/test_slurm.py checks they agree).
min_version("8.0")


# A run directory's own config.yaml (--directory DIR); without one, the clone's defaults.
configfile: str(base_configfile(".", workflow.basedir))


include: "workflow/rules/common.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/cnn.smk"
include: "workflow/rules/images.smk"
include: "workflow/rules/features.smk"
include: "workflow/rules/detect.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/tests_power.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/stream.smk"


rule all:
    default_target: True
    input:
        rules.tables.output,
        rules.figures.output,
        rules.compare.output,
        rules.compare_paper.output,
        rules.tests_power.output if PROTOCOL_TESTS else [],


rule analysis:
    """The neural-persistence analyses (paper Sections 3-4 and appendices); not part of `all`."""
    input:
        rules.analysis_permutation.output,
        rules.analysis_np_variance.output,
        rules.analysis_bounds.output,
        rules.analysis_np_factors.output,
        rules.analysis_size.output,
        rules.analysis_weights.output,
        rules.analysis_early_stopping.output,
        rules.analysis_regularisers.output,
        rules.analysis_dgp_variance.output,
        expand(rules.analysis_compare.output, table=AN_COMPARISONS),


include: "workflow/rules/failing_loudly.smk"


if config["failing_loudly"]["default_target"]:  # config/failing_loudly.yaml
    workflow.default_target = "failing_loudly"
