#!/bin/bash
# --distributed reshard, export and consolidate: 2 and 3 local processes, started by hand
# (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, rank 0 serving the c10d store) and by
# torch 1.13's torchrun (its c10d rendezvous, and its static one where the agent
# serves the store), write exactly the bytes one process writes; a process that
# cannot open its input makes the whole job fail fast, leaving nothing behind;
# Ctrl-C and SIGKILL to either rank end the job within seconds.
# Usage: tests/interop/check_dcp_distributed.sh OPTSTATE_BINARY
set -uo pipefail
bin=$(readlink -f "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
scratch=$(mktemp -d /tmp/optstate-dist-check.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
in=testdata/good/torch26/fsdp2_dcp
pt=testdata/good/torch26/fsdp2_3rank_dcp.consolidated.pt
passed=0 failed=0
pass() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

"$bin" reshard "$in" -o "$scratch/reshard.one" --world-size 5 -q > /dev/null || fail "single-process reshard"
"$bin" export "$pt" -o "$scratch/export.one" --world-size 4 -q > /dev/null || fail "single-process export"

# by_hand NAME PROCESSES COMMAND...: the processes with the usual variables set.
by_hand() {
  local name=$1 procs=$2 port
  shift 2
  port=$(free_port)
  for r in $(seq 0 $((procs - 1))); do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=$procs \
      timeout 120 "$bin" "$@" > "$scratch/$name.$r.out" 2> "$scratch/$name.$r.err" &
  done
  local rc=0
  for job in $(jobs -p); do wait "$job" || rc=1; done
  return $rc
}
for procs in 2 3; do
  if by_hand reshard$procs "$procs" reshard --distributed "$in" -o "$scratch/reshard.$procs" --world-size 5 -q &&
     diff -r "$scratch/reshard.one" "$scratch/reshard.$procs" > /dev/null &&
     [ -s "$scratch/reshard$procs.0.out" ] && [ ! -s "$scratch/reshard$procs.1.out" ]; then
    pass "reshard on $procs processes: same bytes as one, one report"
  else
    fail "reshard on $procs processes"; cat "$scratch"/reshard$procs.*.err
  fi
  if by_hand export$procs "$procs" export --distributed "$pt" -o "$scratch/export.$procs" --world-size 4 -q &&
     diff -r "$scratch/export.one" "$scratch/export.$procs" > /dev/null; then
    pass "export on $procs processes: same bytes as one"
  else
    fail "export on $procs processes"; cat "$scratch"/export$procs.*.err
  fi
done

# torchrun (torch 1.13 from Debian; --redirects/--tee 2 work around its
# Python 3.11 enum bug that breaks the default of 0).
torchrun() { timeout 180 /usr/bin/python3 -m torch.distributed.run --no_python --redirects 2 --tee 2 "$@"; }
if torchrun --standalone --nproc_per_node 3 "$bin" reshard --distributed "$in" -o "$scratch/reshard.tr" \
     --world-size 5 -q > "$scratch/tr.log" 2>&1 && diff -r "$scratch/reshard.one" "$scratch/reshard.tr" > /dev/null; then
  pass "torchrun --standalone, 3 processes: same bytes as one"
else
  fail "torchrun --standalone"; tail -20 "$scratch/tr.log"
fi
if torchrun --nnodes 1 --node_rank 0 --master_addr 127.0.0.1 --master_port "$(free_port)" --nproc_per_node 2 \
     "$bin" reshard --distributed "$in" -o "$scratch/reshard.static" --world-size 5 -q > "$scratch/st.log" 2>&1 &&
   diff -r "$scratch/reshard.one" "$scratch/reshard.static" > /dev/null; then
  pass "torchrun static rendezvous (the agent's store), 2 processes: same bytes as one"
else
  fail "torchrun static rendezvous"; tail -20 "$scratch/st.log"
fi

# Rank 1 cannot open its input: both fail at once, nothing is left.
port=$(free_port)
MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=0 WORLD_SIZE=2 timeout 60 "$bin" reshard --distributed "$in" \
  -o "$scratch/broken" --world-size 2 -q > /dev/null 2> "$scratch/broken.0.err" &
MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=1 WORLD_SIZE=2 timeout 60 "$bin" reshard --distributed "$in.missing" \
  -o "$scratch/broken" --world-size 2 -q > /dev/null 2> "$scratch/broken.1.err"
rc1=$?
wait $!
rc0=$?
if [ "$rc0" = 2 ] && [ "$rc1" = 2 ] && [ ! -e "$scratch/broken" ] && [ ! -e "$scratch/.broken.partial" ] &&
   grep -q "process 1 of 2 failed: not found: $in.missing" "$scratch/broken.0.err"; then
  pass "a process that cannot open its input fails the job; nothing is written"
else
  fail "failing process (exit codes $rc0 $rc1)"; cat "$scratch"/broken.*.err; ls -a "$scratch"
fi
# Rank 1's filesystem fills up (a shim that fails its file writes with ENOSPC,
# which a small tmpfs cannot do for one process of several sharing a directory):
# both fail naming it, nothing is left, and the rerun writes the same bytes.
shim=$scratch/write_faults_shim.so
if ! cc -shared -fPIC -O2 -o "$shim" tests/faults/write_faults_shim.c -ldl; then
  fail "building tests/faults/write_faults_shim.c"
else
  port=$(free_port)
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=0 WORLD_SIZE=2 timeout 60 "$bin" export --distributed "$pt" \
    -o "$scratch/full" --world-size 4 -q > /dev/null 2> "$scratch/full.0.err" &
  # ASan wants its runtime first among the libraries; the shim only forwards to it.
  OPTSTATE_TEST_FULL_AFTER=0 LD_PRELOAD=$shim ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=1 WORLD_SIZE=2 timeout 60 "$bin" export --distributed "$pt" \
    -o "$scratch/full" --world-size 4 -q > /dev/null 2> "$scratch/full.1.err"
  rc1=$?
  wait $!
  rc0=$?
  if [ "$rc0" = 2 ] && [ "$rc1" = 2 ] && [ ! -e "$scratch/full" ] && [ ! -e "$scratch/.full.partial" ] &&
     grep -q "process 1 of 2 failed: .*No space left on device" "$scratch/full.0.err" &&
     grep -q "No space left on device" "$scratch/full.1.err" &&
     by_hand full_rerun 2 export --distributed "$pt" -o "$scratch/full" --world-size 4 -q &&
     diff -r "$scratch/export.one" "$scratch/full" > /dev/null; then
    pass "one process's filesystem full: the job fails naming it, nothing is left, the rerun matches"
  else
    fail "filesystem full on rank 1 (exit codes $rc0 $rc1)"; cat "$scratch"/full.*.err; ls -a "$scratch"
  fi
fi
# Ctrl-C reaches one process of a running job (either rank): that one exits 130,
# the other fails at its next exchange with an error naming the store, and
# nothing is left: neither the output nor the shared staging directory.
"$bin" regenerate -q --synthetic 512MiB --steps 1 --with-model --no-sync -o "$scratch/big.pt" > /dev/null
# start_export NAME: ranks 0 and 1 of an export of big.pt to $scratch/NAME, started
# (pids, port, and a watchdog that kills both after 120 s), once its staging
# directory exists, i.e. while they write.
start_export() { start_job "$1" export --distributed "$scratch/big.pt" -o "$scratch/$1" --world-size 4 -q; }
# start_job NAME COMMAND...: the same for any command writing $scratch/NAME.
start_job() {
  local name=$1
  shift
  port=$(free_port) pids=()
  for r in 0 1; do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 "$bin" "$@" > /dev/null 2> "$scratch/$name.$r.err" &
    pids+=($!)
  done
  ( sleep 120; kill -9 "${pids[@]}" 2> /dev/null ) & watchdog=$!
  for _ in $(seq 200); do [ -e "$scratch/.$name.partial" ] && break; sleep 0.05; done
}
# kill_one VICTIM: SIGKILL to that rank of the job start_job started; waits for
# the other ($rc: its exit code, $took: seconds after the kill) and the watchdog.
kill_one() {
  local killed_at
  killed_at=$(date +%s)
  kill -9 "${pids[$1]}"
  wait "${pids[$((1 - $1))]}"; rc=$?
  took=$(( $(date +%s) - killed_at ))
  { wait "${pids[$1]}"; } 2> /dev/null
  kill "$watchdog" 2> /dev/null; wait "$watchdog" 2> /dev/null
}
for victim in 0 1; do
  start_export "int$victim"
  kill -INT "${pids[$victim]}"
  wait "${pids[0]}"; rc0=$?
  wait "${pids[1]}"; rc1=$?
  kill "$watchdog" 2> /dev/null; wait "$watchdog" 2> /dev/null
  other=$((1 - victim))
  rcs=("$rc0" "$rc1")
  if [ "${rcs[$victim]}" = 130 ] && [ "${rcs[$other]}" = 2 ] && [ ! -e "$scratch/int$victim" ] &&
     [ ! -e "$scratch/.int$victim.partial" ] && grep -q "c10d store at 127.0.0.1:$port" "$scratch/int$victim.$other.err" &&
     { [ "$victim" = 0 ] || grep -qF "process 1 of 2 was interrupted (SIGINT)" "$scratch/int$victim.0.err"; }; then
    pass "Ctrl-C to rank $victim of a running export: exits 130, rank $other fails with exit 2, nothing left"
  else
    fail "Ctrl-C to rank $victim (exit codes $rc0 $rc1)"; cat "$scratch"/int$victim.*.err; ls -a "$scratch"
  fi
done

# SIGKILL (the OOM killer, a node lost) gives nobody a chance to say so. A worker
# killed mid-export: rank 0 notices its heartbeat stopped and exits 2 naming it
# within the 10 s heartbeat timeout (its own writing cancelled), leaving
# nothing. Rank 0, which serves the store, killed: the worker exits 2 at once
# naming the store; rank 0's staging directory is left for the next run to
# report, and that run writes exactly what one process writes.
"$bin" export "$scratch/big.pt" -o "$scratch/big.one" --world-size 4 -q > /dev/null || fail "single-process export of big.pt"
for victim in 1 0; do
  start_export "kill$victim"
  other=$((1 - victim))
  kill_one "$victim"
  if [ "$victim" = 1 ]; then
    said="c10d store at 127.0.0.1:$port: process 1 of 2 stopped answering: no heartbeat for 10 s"
  else
    said="c10d store at 127.0.0.1:$port"
  fi
  if [ "$rc" = 2 ] && [ "$took" -le 30 ] && [ ! -e "$scratch/kill$victim" ] &&
     grep -qF "$said" "$scratch/kill$victim.$other.err" &&
     { [ "$victim" = 0 ] || [ ! -e "$scratch/.kill$victim.partial" ]; }; then
    pass "SIGKILL to rank $victim of a running export: rank $other exits 2 after ${took} s naming it, no output"
  else
    fail "SIGKILL to rank $victim (exit $rc after ${took} s)"; cat "$scratch"/kill$victim.*.err; ls -a "$scratch"
  fi
done
if ! by_hand refused 2 export --distributed "$scratch/big.pt" -o "$scratch/kill0" --world-size 4 -q &&
   grep -qF "$scratch/.kill0.partial: exists: another run is writing $scratch/kill0, or one was interrupted (then remove it)" \
     "$scratch/refused.0.err" && [ ! -e "$scratch/kill0" ] && rm -r "$scratch/.kill0.partial" &&
   by_hand rerun 2 export --distributed "$scratch/big.pt" -o "$scratch/kill0" --world-size 4 -q &&
   diff -r "$scratch/big.one" "$scratch/kill0" > /dev/null; then
  pass "after rank 0 was killed the next run names its staging directory; once removed, the same bytes as one process"
else
  fail "rerun after SIGKILL"; cat "$scratch"/refused.*.err "$scratch"/rerun.*.err
fi

# consolidate --distributed: the processes write one torch.save file, each its
# share of the tensors at offsets planned up front; the same bytes as one
# process (the output's name is the zip's top directory, so each run writes
# its own directory's big.pt). Then the same faults as export above.
mkdir -p "$scratch/c1" "$scratch/c2" "$scratch/c3"
"$bin" consolidate "$scratch/big.one" -o "$scratch/c1/big.pt" -q > /dev/null || fail "single-process consolidate"
"$bin" consolidate "$in" -o "$scratch/c1/small.pt" -q > /dev/null || fail "single-process consolidate of $in"
if by_hand consolidate2 2 consolidate --distributed "$scratch/big.one" -o "$scratch/c2/big.pt" -q &&
   cmp "$scratch/c1/big.pt" "$scratch/c2/big.pt" && [ -s "$scratch/consolidate2.0.out" ] &&
   [ ! -s "$scratch/consolidate2.1.out" ] && [ "$(ls -A "$scratch/c2")" = big.pt ]; then
  pass "consolidate on 2 processes of $(( $(stat -c %s "$scratch/c1/big.pt") >> 20 )) MiB: same bytes as one, one report"
else
  fail "consolidate on 2 processes"; cat "$scratch"/consolidate2.*.err; ls -a "$scratch/c2"
fi
if by_hand consolidate3 3 consolidate --distributed "$in" -o "$scratch/c3/small.pt" -q &&
   cmp "$scratch/c1/small.pt" "$scratch/c3/small.pt"; then
  pass "consolidate on 3 processes: same bytes as one"
else
  fail "consolidate on 3 processes"; cat "$scratch"/consolidate3.*.err
fi
# A DeepSpeed ZeRO-3 directory (real DeepSpeed 0.16.4 files) the same way.
zero=testdata/frameworks/deepspeed_0.16.4/zero3
mkdir -p "$scratch/z1" "$scratch/z2"
"$bin" consolidate "$zero" -o "$scratch/z1/zero.pt" -q > /dev/null || fail "single-process consolidate of $zero"
if by_hand zconsolidate 2 consolidate --distributed "$zero" -o "$scratch/z2/zero.pt" -q &&
   cmp "$scratch/z1/zero.pt" "$scratch/z2/zero.pt" && [ "$(ls -A "$scratch/z2")" = zero.pt ]; then
  pass "consolidate of a ZeRO-3 directory on 2 processes: same bytes as one"
else
  fail "consolidate of a ZeRO-3 directory on 2 processes"; cat "$scratch"/zconsolidate.*.err
fi
if [ -f "$shim" ]; then
  port=$(free_port)
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=0 WORLD_SIZE=2 timeout 60 "$bin" consolidate --distributed \
    "$scratch/big.one" -o "$scratch/c2/full.pt" -q > /dev/null 2> "$scratch/cfull.0.err" &
  OPTSTATE_TEST_FULL_AFTER=0 LD_PRELOAD=$shim ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=1 WORLD_SIZE=2 timeout 60 "$bin" consolidate --distributed \
    "$scratch/big.one" -o "$scratch/c2/full.pt" -q > /dev/null 2> "$scratch/cfull.1.err"
  rc1=$?
  wait $!
  rc0=$?
  if [ "$rc0" = 2 ] && [ "$rc1" = 2 ] && [ "$(ls -A "$scratch/c2")" = big.pt ] &&
     grep -q "process 1 of 2 failed: .*No space left on device" "$scratch/cfull.0.err"; then
    pass "consolidate: one process's filesystem full fails the job naming it, nothing is left"
  else
    fail "consolidate, filesystem full on rank 1 (exit codes $rc0 $rc1)"; cat "$scratch"/cfull.*.err; ls -a "$scratch/c2"
  fi
fi
for victim in 1 0; do
  start_job "ckill$victim" consolidate --distributed "$scratch/big.one" -o "$scratch/ckill$victim" -q
  other=$((1 - victim))
  kill_one "$victim"
  if [ "$rc" = 2 ] && [ "$took" -le 30 ] && [ ! -e "$scratch/ckill$victim" ] &&
     grep -qF "c10d store at 127.0.0.1:$port" "$scratch/ckill$victim.$other.err" &&
     { [ "$victim" = 0 ] || [ ! -e "$scratch/.ckill$victim.partial" ]; }; then
    pass "SIGKILL to rank $victim of a running consolidate: rank $other exits 2 after ${took} s naming it, no output"
  else
    fail "consolidate, SIGKILL to rank $victim (exit $rc after ${took} s)"; cat "$scratch"/ckill$victim.*.err
    ls -a "$scratch"
  fi
done
if ! by_hand crefused 2 consolidate --distributed "$scratch/big.one" -o "$scratch/ckill0" -q &&
   grep -qF "$scratch/.ckill0.partial: exists: another run is writing $scratch/ckill0, or one was interrupted (then remove it)" \
     "$scratch/crefused.0.err" && [ ! -e "$scratch/ckill0" ] && rm "$scratch/.ckill0.partial" &&
   mkdir "$scratch/c4" && by_hand crerun 2 consolidate --distributed "$scratch/big.one" -o "$scratch/c4/big.pt" -q &&
   cmp "$scratch/c1/big.pt" "$scratch/c4/big.pt"; then
  pass "consolidate after rank 0 was killed: the next run names the leftover; once removed, the same bytes as one"
else
  fail "consolidate rerun after SIGKILL"; cat "$scratch"/crefused.*.err "$scratch"/crerun.*.err
fi

# Two jobs started on one output: the second refuses (its rank 0 finds the
# first's staging name) and touches nothing of the first, which completes with
# the bytes one process writes. The first job's rank 1 waits 6 s before its
# first write, so the second job starts while the first is surely writing.
two_jobs() {  # NAME OUTPUT EXPECTED LEFTOVER COMMAND...: COMMAND gets --distributed and -o OUTPUT
  local name=$1 out=$2 expected=$3 leftover=$4
  shift 4
  local port
  port=$(free_port) pids=()
  for r in 0 1; do
    local delay=()
    [ "$r" = 1 ] && delay=(LD_PRELOAD="$shim" OPTSTATE_TEST_FIRST_WRITE_DELAY_MS=6000
                           ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0")
    env "${delay[@]}" MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 timeout 120 "$bin" "$@" \
      --distributed -o "$out" -q > /dev/null 2> "$scratch/${name}A.$r.err" &
    pids+=($!)
  done
  for _ in $(seq 200); do [ -e "$leftover" ] && break; sleep 0.05; done
  by_hand "${name}B" 2 "$@" --distributed -o "$out" -q; local rc_b=$?
  local rc_a=0
  wait "${pids[0]}" || rc_a=1
  wait "${pids[1]}" || rc_a=1
  if [ "$rc_b" != 0 ] && [ "$rc_a" = 0 ] &&
     grep -qF "$leftover: exists: another run is writing $out, or one was interrupted (then remove it)" \
       "$scratch/${name}B.0.err" && grep -qF "process 0 of 2 failed" "$scratch/${name}B.1.err" &&
     diff -r "$expected" "$out" > /dev/null && [ ! -e "$leftover" ]; then
    pass "$name: a second job on the same output refuses; the first completes with the bytes of one process"
  else
    fail "$name: two jobs on one output (exit codes: first $rc_a, second $rc_b)"; cat "$scratch"/${name}?.*.err
  fi
}
if [ -f "$shim" ]; then
  two_jobs "export, two jobs" "$scratch/twice" "$scratch/big.one" "$scratch/.twice.partial" \
    export "$scratch/big.pt" --world-size 4
  mkdir -p "$scratch/c5"
  two_jobs "consolidate, two jobs" "$scratch/c5/big.pt" "$scratch/c1/big.pt" "$scratch/c5/.big.pt.partial" \
    consolidate "$scratch/big.one"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
