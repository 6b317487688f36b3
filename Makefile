# Two commands: `make run` serves the embedded default, `make test` runs the whole suite
# (it starts its own throwaway PostgreSQL and Redis). The logic lives in scripts/.
#
#   make test ARGS="-k hello -x"   passes ARGS through to pytest

ARGS ?=

.PHONY: run worker test bench

run:
	bash scripts/run.sh

worker:
	bash scripts/worker.sh

test:
	bash scripts/test.sh $(ARGS)

# The project beside the pinned TypeScript runtimes (benchmarks/README.md); ARGS="--quick".
bench:
	.venv/bin/python -m benchmarks.side_by_side $(ARGS)
