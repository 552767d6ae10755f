#!/usr/bin/env bash
# Run the test suite several times in a row while other processes keep every core busy, the way a
# shared CI machine runs it; a test that depends on timing or load fails here.
#
#   tools/under_load.sh                 # the whole suite 3 times, with one busy loop per core
#   tools/under_load.sh 5 tests/train   # 5 times, pytest's arguments after the count
#
# BUSY (default: the number of cores, `nproc`) sets how many busy loops run; PYTHON the interpreter
# (default: python). The busy loops are stopped however the script ends (trap). Exit status: 0 when
# every run passed, else the number of failed runs (at most 255).
set -uo pipefail

RUNS="${1:-3}"
shift || true
PYTHON="${PYTHON:-python}"
BUSY="${BUSY:-$(nproc)}"
loops=()
tests=""

stop_loops() {  # and a pytest run still going when the script is interrupted
  for pid in "${loops[@]}" $tests; do kill "$pid" 2>/dev/null; done
  for pid in "${loops[@]}" $tests; do wait "$pid" 2>/dev/null; done
  loops=()
}
trap stop_loops EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq "$BUSY"); do
  "$PYTHON" -c "while True: pass" &
  loops+=("$!")
done
echo "under_load.sh: $BUSY busy loop(s) running (pids ${loops[*]}); $RUNS run(s) of: $PYTHON -m pytest -q $*"

failed=0
for run in $(seq "$RUNS"); do
  # in the background, so that a signal to this script is handled at once; a script's background job starts
  # with SIGINT ignored, which its tests would inherit, so pytest gets Python's usual SIGINT handler back
  "$PYTHON" -c 'import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); sys.exit(pytest.main(sys.argv[1:]))' -q "$@" &
  tests=$!
  wait "$tests"
  status=$?
  tests=""
  if [ "$status" = 0 ]; then
    echo "under_load.sh: run $run of $RUNS passed"
  else
    echo "under_load.sh: run $run of $RUNS FAILED"
    failed=$((failed + 1))
  fi
done
echo "under_load.sh: $((RUNS - failed)) of $RUNS run(s) passed under load"
exit $((failed > 255 ? 255 : failed))
