# Every target does its own set-up: a fresh clone needs nothing but python3 (>= 3.11).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CORES  ?= 2
PYTEST_ARGS ?=

.PHONY: help venv test bench lint docs run report analysis slurm-up slurm-down clean

help:
	@echo "make test   - create .venv if needed, install dgpbench[dev], run the test suite"
	@echo "make run    - same set-up, run the workflow's default target (snakemake --cores $(CORES))"
	@echo "make report - after make run: results/report.html with every table and figure"
	@echo "make analysis - the neural-persistence analyses (Sections 3-4, appendix)"
	@echo "make bench  - run the speed benchmarks under benchmarks/"
	@echo "make lint   - ruff check and format, snakemake --lint (default and Failing-loudly configs)"
	@echo "make docs   - build the documentation site into site/ (mkdocs, warnings as errors)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the project metadata changes (the package itself is installed editable).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# One pytest-xdist worker per core (-n auto), each taking over the other's queue when its
# own runs dry (worksteal); PYTEST_ARGS="-n 0" runs in one process. Bytecode caching on even
# where the environment turns it off: else every worker rewrites every test module's asserts
# and every workflow job recompiles the package from source.
test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n auto --dist worksteal $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m pytest benchmarks --benchmark-only --benchmark-columns=min,mean,ops -p no:cacheprovider -s

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakemake --lint --cores 1
	$(BIN)/snakemake --lint --cores 1 --configfile config/failing_loudly.yaml

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

run: $(STAMP)
	$(BIN)/dgpbench run --cores $(CORES) --profile workflow/profiles/local

# Snakemake's self-contained HTML report (every table and figure, captioned) of the targets
# already run: after make analysis too, make report REPORT_TARGETS="all analysis".
REPORT_TARGETS ?= all
report: $(STAMP)
	$(BIN)/snakemake --report results/report.html $(REPORT_TARGETS)

slurm-up:
	bash scripts/slurm.sh start

slurm-down:
	bash scripts/slurm.sh stop

clean:
	rm -rf $(VENV) .venv-floor site .pytest_cache .benchmarks

# The neural-persistence analyses of Sections 3-4 (a separate target: ~10 min on 2 cores).
analysis: $(STAMP)
	$(BIN)/dgpbench run analysis --cores $(CORES) --profile workflow/profiles/local
