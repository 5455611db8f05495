# The two commands of the README: `make dev` and `make test`. Each builds .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_WORKERS ?= 2

.PHONY: dev test bench faults load install clean constraints check-installed lint

# Every install resolves inside constraints.txt: the exact set the tests passed on.
$(STAMP): pyproject.toml constraints.txt feedfabric/ops/vendor.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# The CPU build of torch from this machine's disk; a range would pull a CUDA build.
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[embedded,ml,test,bench]'
	# Browser assets (GraphiQL, charts) from the npm registry, pinned in feedfabric/ops/vendor.json.
	$(BIN)/python -m feedfabric.ops.vendor
	touch $(STAMP)

# The browser test drives Debian's chromium through Playwright (its own browser download cannot work here).
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

install: $(STAMP) $(CHROMIUM)

dev: $(STAMP)
	$(BIN)/feedfabric dev --demo

# The lint gate runs beside the tests, which mostly wait on their services and leave a core to it; both
# must pass, and the lint's output follows the tests'. Two pytest workers (pytest-xdist), each with its own
# embedded services, overlap one test's waits with another's work: the suite takes under half the time.
test: $(STAMP) $(CHROMIUM) check-installed
	@$(MAKE) --no-print-directory lint > $(VENV)/lint.log 2>&1 & lint=$$!; \
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup; tests=$$?; \
	wait $$lint; linted=$$?; cat $(VENV)/lint.log; \
	test $$tests -eq 0 && test $$linted -eq 0

# ruff (lint and format), mypy and the import-linter layer contracts, configured in pyproject.toml;
# `make test` runs them beside the tests.
lint: $(STAMP)
	$(BIN)/ruff check feedfabric tests bench faults
	$(BIN)/ruff format --check feedfabric tests bench faults
	$(BIN)/mypy
	$(BIN)/lint-imports

# Fails when what is installed is not exactly constraints.txt (a package added, missing or at another
# version), or when the installed set's own requirements are broken.
check-installed: $(STAMP)
	$(BIN)/pip check
	$(BIN)/pip freeze --exclude-editable | LC_ALL=C sort > $(VENV)/installed.txt
	grep -v '^#' constraints.txt | diff -u - $(VENV)/installed.txt \
		|| { echo "installed packages differ from constraints.txt (run 'make constraints' after a deliberate change)"; exit 1; }

# After a deliberate dependency change (pyproject.toml, then pip install): pin what is now installed.
constraints:
	{ echo '# The exact set `make` installs and `make test` checks; regenerate with `make constraints`.'; \
	  $(BIN)/pip freeze --exclude-editable | LC_ALL=C sort; } > constraints.txt

# Every fault case in its full form, three runs in a row (`make test` runs short forms): the single-host
# cases of faults/cases.py, then the network cases of faults/partitions.py (hosts in network namespaces; root).
faults: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m faults --runs 3
	HF_HUB_OFFLINE=1 $(BIN)/python -m faults --network --runs 3

load: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python bench/load.py --seconds $${LOAD_SECONDS:-60}

BENCHES := fanout post_to_timeline home_feed realtime embeddings media notification_groups

bench: $(STAMP)
	for b in $(BENCHES); do HF_HUB_OFFLINE=1 $(BIN)/python bench/$$b.py || exit 1; done

clean:
	rm -rf $(VENV) .feedfabric
