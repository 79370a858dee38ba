# dptop: `make demo` opens the monitor on the bundled capture, `make test` runs the test suite.
# Both create (or reuse) the virtualenv .venv and install what they need into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow bench venv lint system-deps clean

venv: $(STAMP)

# Optional system packages: libpcap compiles BPF filters for live capture; tmux runs the terminal
# view's test; the xcb libraries let Qt open a window under Xvfb. Installed when this runs as root on
# Debian/Ubuntu; otherwise the features that need them say so (and their tests skip).
DEBS := libpcap0.8 tmux libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxkbcommon-x11-0 xvfb
system-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=$$(for d in $(DEBS); do dpkg -s $$d >/dev/null 2>&1 || echo $$d; done); \
	  if [ -n "$$missing" ]; then echo "installing system libraries: $$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null \
	    || echo "note: could not install $$missing; live BPF filters / the Xvfb screenshot test will be unavailable"; fi; \
	fi

# pip prints a line per package it fetches (no progress bars) but nothing while it unpacks them, so
# the install goes in three steps (the core, the window's Qt, the rest) to never be silent for long;
# the kernels the first run needs compile here, the rest on first use (dptop compile).
PIP := $(PY) -m pip install --progress-bar off --disable-pip-version-check
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	$(PIP) -e '.[gui]'
	$(PIP) -e '.[test]'
	$(VENV)/bin/dptop compile --first
	touch $(STAMP)

demo: $(STAMP) system-deps
	$(VENV)/bin/dptop demo

# import-linter reads the installed layout (one package, dptop), so it checks a plain install of the
# tree made into build/lint: the editable install maps folders in a way its graph builder cannot walk.
lint: $(STAMP)
	rm -rf build
	$(PY) -m pip install --quiet --no-deps --no-build-isolation --target build/lint .
	PYTHONPATH=build/lint $(VENV)/bin/lint-imports

# every kernel compiled first, two at a time, instead of one by one as the tests reach them; then the
# test files spread over TEST_WORKERS processes (pytest-xdist; a file's tests stay in one process, so
# they share its fixtures); the slowest tests are listed so the five-minute budget stays visible
TEST_WORKERS ?= 4
test: $(STAMP) system-deps lint
	$(VENV)/bin/dptop compile
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15

# what the default run leaves out: statistical, utility, soak, packaging and benchmark checks, and the
# full versions of checks the default run samples (scapy's redissection of the bundled captures,
# DPSW's checkpoint closed form for every length to 300, reading captures of 4 KB gzip members in linear time)
test-slow: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -m slow --durations=15

bench: $(STAMP)
	$(VENV)/bin/dptop bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
