# dptop: `make demo` opens the monitor on the bundled capture, `make test` runs the test suite.
# Both create (or reuse) the virtualenv .venv and install what they need into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow bench venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dptop demo

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q

test-slow: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -m slow

bench: $(STAMP)
	$(VENV)/bin/dptop bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
