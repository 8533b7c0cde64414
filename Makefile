# kip_lab — everything a fresh machine needs, behind two commands:
#   make lab    set up and launch JupyterLab on notebooks/ (the main job)
#   make test   set up and run the whole test suite (what CI runs)
# Both create .venv with the machine's Python 3.11+ and install what they need into it.

# The distribution's interpreter when it is 3.11+ and can make a venv: Debian builds it with
# profile-guided and link-time optimisation, statically linked, and the Lab steps about 28%
# faster on it than on a default source build (docs/decisions.md P11). Any python3 >= 3.11 works:
# `make test PYTHON=python3`.
PYTHON ?= $(or $(shell for p in /usr/bin/python3 python3; do \
	$$p -c 'import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && { echo $$p; break; }; \
	done),python3)
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: lab test bench lint typecheck clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

# The notebooks' environment: kip_lab with the `lab` extra (JupyterLab, the pictures, Spark for
# notebook 14, the wire codec and confluent-kafka for 17), graphviz and a Java runtime.
$(VENV)/.lab-installed: pyproject.toml | $(BIN)/python
	bash scripts/system-deps.sh dot java
	$(PIP) install -e ".[lab]"
	@touch $@

# The tests' environment adds the test tools (pytest, nbval, Playwright, ruff, mypy, ...) and
# Chromium for the real-browser test, kcat and Node.js for the front door's real-client tests.
$(VENV)/.installed: $(VENV)/.lab-installed
	bash scripts/system-deps.sh dot java chromium kcat node npm
	$(PIP) install -e ".[lab,test]"
	@touch $@

# --allow-root: JupyterLab refuses root without it, and containers (Binder, CI) often are root.
lab: $(VENV)/.lab-installed
	$(BIN)/jupyter lab --notebook-dir=notebooks $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# One worker per core (pytest-xdist); a file's tests stay on one worker, which shares their fixtures.
test: $(VENV)/.installed
	$(BIN)/python -m pytest -n auto --dist loadfile

bench: $(VENV)/.installed
	$(BIN)/python -m benchmarks

lint: typecheck
	$(BIN)/ruff check .

# mypy over the `files` of [tool.mypy] in pyproject.toml.
typecheck: $(VENV)/.installed
	$(BIN)/python -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .mypy_cache
