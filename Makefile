# The two entry points a new user needs are `make run` and `make test`; both install what
# they need first (scripts/bootstrap.sh is idempotent).
PY := .venv/bin/python
SHELL := /bin/bash

.PHONY: sim sim-mutants sim-long fuzz model run test setup gen-protos check-protos lint typecheck format unit bench bench-smoke compose-up compose-down compose-smoke compose-up-oxia compose-down-oxia compose-smoke-oxia dist-spark

setup:
	@scripts/bootstrap.sh

run: setup
	$(PY) -m services.cli demo

# CI runs exactly this: generated code fresh, lint and types clean, then the whole suite on
# TEST_WORKERS pytest-xdist workers: two per core of a two-core CI machine, because the tests
# wait much of their time (services starting, retry back-offs, age windows, child
# processes): two workers took 24.7 minutes, four 14.7 to 20.8 with both cores busy throughout
# (docs/testing.md, "Four workers on two cores"). Whole files go to one
# worker (`loadfile`): a file's module-scoped fixtures (a Spark analysis, a simulated world)
# are built once. Files are handed out in collection order, where tests/conftest.py puts the
# slowest first (xdist would otherwise reorder them by test count). `make test
# TEST_WORKERS=0`, or plain `pytest`, runs it in one process.
TEST_WORKERS ?= 4
test: setup check-protos lint typecheck
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

unit: setup
	$(PY) -m pytest -m "not slow"

gen-protos: setup
	$(PY) scripts/gen_protos.py

check-protos: setup
	$(PY) scripts/gen_protos.py --check

# The layers and rules between packages ([tool.importlinter] in pyproject.toml): a broken
# contract names the import.
lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/lint-imports

format: setup
	.venv/bin/ruff check --fix .
	.venv/bin/ruff format .

typecheck: setup
	.venv/bin/mypy

# The protocol model, checked with spin: ours verifies, PIP-186's rule fails (docs/model.md);
# then the fence rule on Oxia's versions (model/oxia.pml).
model: setup
	$(PY) model/check.py
	$(PY) model/check.py --model oxia

# gRPC fuzzing of the three services' surfaces, 10,000 generated calls each (docs/fuzz.md).
fuzz: setup
	$(PY) -m tests.fuzz.run --requests $${FUZZ_REQUESTS:-10000}

bench: setup
	$(PY) -m benchmarks list

# Every benchmark at a tiny size, one at a time (the two Spark ones in one process, sharing
# its driver JVM), each failing on work that did not happen.
# CI runs the same through the suite (tests/test_bench_smoke.py).
bench-smoke: setup
	$(PY) -m benchmarks smoke

# The Compose stack (a real Pulsar cluster, MinIO, the three services, Prometheus): see README.
compose-up:
	@test -f compose/.env || cp compose/.env.example compose/.env
	docker compose -f compose/compose.yaml up -d --build

compose-down:
	docker compose -f compose/compose.yaml down

# After compose-up, on a machine with Docker: one topic through rollover, offload and trim,
# checked in ZooKeeper, MinIO and `tombstone deleter status` (see docs/compose.md).
compose-smoke:
	compose/smoke.sh

# The same stack with Oxia instead of ZooKeeper as the metadata store (compose/compose.oxia.yaml
# merged onto compose.yaml; docs/compose.md, "The Oxia variant").
COMPOSE_OXIA = docker compose -f compose/compose.yaml -f compose/compose.oxia.yaml

compose-up-oxia:
	@test -f compose/.env || cp compose/.env.example compose/.env
	$(COMPOSE_OXIA) up -d --build

compose-down-oxia:
	$(COMPOSE_OXIA) down

compose-smoke-oxia:
	SMOKE_METADATA=oxia compose/smoke.sh

# The reconciler for spark-submit: dist/tombstone-spark.zip (--py-files) and the driver script.
dist-spark: setup
	$(PY) scripts/dist_spark.py --out dist

# The deterministic simulation (docs/simulation.md): `make sim SEEDS=N` runs seeds 0..N-1,
# `make sim SEED=s` replays one seed with its full trace, `make sim-mutants` hunts the planted
# bugs, `make sim-long` runs 100,000 seeds in the background into build/sim-long.txt.
SEEDS ?= 2000
sim: setup
	@if [ -n "$(SEED)" ]; then PYTHONHASHSEED=0 $(PY) -m sim --seed $(SEED); \
	else PYTHONHASHSEED=0 $(PY) -m sim --seeds $(SEEDS); fi

sim-mutants: setup
	PYTHONHASHSEED=0 $(PY) -m sim --mutants

sim-long: setup
	@mkdir -p build
	PYTHONHASHSEED=0 nohup $(PY) -m sim --seeds 100000 --summary build/sim-long.txt \
		> build/sim-long.log 2>&1 &
	@echo "sim-long: running in the background; summary in build/sim-long.txt"
