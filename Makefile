# kip_lab — everything a fresh machine needs, behind two commands:
#   make lab    set up and launch JupyterLab on notebooks/ (the main job)
#   make test   set up and run the whole test suite (what CI runs)
# Both create .venv with the machine's python3 and install what they need into it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: lab test bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(VENV)/.lab: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[lab,test]"
	@touch $@

$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[test]"
	@touch $@

lab: $(VENV)/.lab
	$(BIN)/jupyter lab --notebook-dir=notebooks

test: $(VENV)/.test
	$(BIN)/python -m pytest

bench: $(VENV)/.test
	$(BIN)/python -m benchmarks

lint: $(VENV)/.test
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
