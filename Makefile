# The two set-up commands of the README. Both install what is missing first (infra/bootstrap.sh).
.PHONY: run test soak soak-short scale-out bench

run:  ## run the main job on the local stack
	infra/bootstrap.sh
	.venv/bin/webgym run

test:  ## run every test tier against the real local stack, printing each tier's wall time
	infra/bootstrap.sh
	.venv/bin/webgym up
	infra/test_tiers.sh

soak:  ## the full soak, a benchmark: 1,000 episodes on one browser worker (about 15 minutes), recorded in bench/results/soak.json
	infra/bootstrap.sh
	.venv/bin/webgym up
	WEBGYM_SOAK_RESULT=bench/results/soak.json .venv/bin/pytest -m soak

soak-short:  ## CI's soak: the same test with 120 episodes, a fresh browser every 40 (about 3 minutes)
	infra/bootstrap.sh
	.venv/bin/webgym up
	WEBGYM_CHAOS_SOAK_EPISODES=120 WEBGYM_BROWSER_RECYCLE_AFTER=40 .venv/bin/pytest -m soak

scale-out:  ## the scale-out fault table: the loop on a local three-node cluster while workers and brokers come and go, recorded in bench/results/scale_out_faults.json
	infra/bootstrap.sh
	.venv/bin/webgym up
	WEBGYM_SCALE_OUT_EPISODES=24 WEBGYM_FAULT_TABLE=bench/results/scale_out_faults.json .venv/bin/pytest tests/chaos/test_cluster.py

bench:  ## benchmarks; results land in bench/results/*.json
	infra/bootstrap.sh
	.venv/bin/webgym up
	.venv/bin/python -m bench.serde_observation
	.venv/bin/python -m bench.browser_fleet
	.venv/bin/python -m bench.policy_worker
	.venv/bin/python -m bench.task_load
	.venv/bin/python -m bench.learner
	.venv/bin/python -m bench.tiny_policy
	.venv/bin/webgym bench rollout
