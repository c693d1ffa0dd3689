# The stages of .ci/run, sourced by it (and by tests/test_ci.py, which shows each can fail).
#   run   NAME COMMAND...   runs now, in the foreground (for what later stages need:
#                           an install, a tool)
#   start NAME COMMAND...   starts in the background with its own log; `join` waits for
#                           every started stage and prints each log whole, in order
#   tests ARGS...           pytest ARGS, where exit 5 (no test ran) is a failure
#   exits N COMMAND...      passes only when COMMAND exits N (a planted bug is caught)
#   finish                  prints every stage's time and verdict; exit 1 if any failed
# A foreground stage's line also says how busy the machine's cores were over it, and how much
# of the time they sat waiting on the disk (from /proc/stat, where there is one): a stage far
# below 100 % busy waits on something other than the processor, and more pytest workers
# would shorten it.
# A failing stage does not stop the ones after it (one run shows every failure); `finish`
# fails the run.
logs="$(mktemp -d)"
names=() codes=() times=() uses=() pending=()
run_start=$(date +%s)

_record() {  # NAME CODE SECONDS [USE]
    names+=("$1"); codes+=("$2"); times+=("$3"); uses+=("${4:-}")
    local verdict="ok"; [ "$2" -eq 0 ] || verdict="FAILED (exit $2)"
    echo "=== stage '$1': $verdict in $3 s${4:+ ($4)}"
}

_ticks() {  # the machine's busy, idle and disk-wait ticks so far (nothing without /proc/stat)
    local _cpu u n s i w q sq st
    read -r _cpu u n s i w q sq st _ < /proc/stat 2>/dev/null || return 0
    echo "$((u + n + s + q + sq + st)) $i $w"
}

_use() {  # BEFORE AFTER: "cores N % busy, M % waiting on the disk" over the interval
    local b0 i0 w0 b1 i1 w1
    read -r b0 i0 w0 <<< "$1"; read -r b1 i1 w1 <<< "$2"
    [ -n "$b0" ] && [ -n "$b1" ] || return 0
    local all=$(( (b1 - b0) + (i1 - i0) + (w1 - w0) ))
    [ "$all" -gt 0 ] || return 0
    echo "cores $(( 100 * (b1 - b0) / all )) % busy, $(( 100 * (w1 - w0) / all )) % waiting on the disk"
}

run() {
    local name="$1"; shift
    echo "=== stage '$name': $*"
    local t0 c0; t0=$(date +%s); c0=$(_ticks)
    "$@"; local rc=$?
    _record "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(_use "$c0" "$(_ticks)")"
    return 0
}

start() {
    local name="$1"; shift
    local i=${#pending[@]}
    echo "=== stage '$name' started in the background: $*"
    ( t0=$(date +%s); "$@" > "$logs/$i.log" 2>&1; rc=$?
      echo "$rc $(( $(date +%s) - t0 ))" > "$logs/$i.done" ) &
    pending+=("$name|$!")
}

join() {
    local i entry name rc seconds
    for i in "${!pending[@]}"; do
        entry="${pending[$i]}"; name="${entry%|*}"
        wait "${entry##*|}"
        read -r rc seconds < "$logs/$i.done" || { rc=1; seconds=0; }
        echo "--- stage '$name' (background) log:"
        cat "$logs/$i.log"
        _record "$name" "$rc" "$seconds"
    done
    pending=()
    rm -f "$logs"/*.log "$logs"/*.done
}

tests() {
    pytest "$@"; local rc=$?
    [ "$rc" -ne 5 ] || echo "pytest $*: no test ran (exit 5): nothing was checked"
    return "$rc"
}

exits() {
    local want="$1"; shift
    "$@"; local rc=$?
    [ "$rc" -eq "$want" ] || { echo "$*: exit $rc, expected $want"; return 1; }
}

finish() {
    local i failed=0
    echo "=== stages"
    for i in "${!names[@]}"; do
        printf '%6s s  %-4s %s%s\n' "${times[$i]}" "$([ "${codes[$i]}" -eq 0 ] && echo ok || echo FAIL)" \
            "${names[$i]}" "${uses[$i]:+ (${uses[$i]})}"
        [ "${codes[$i]}" -eq 0 ] || failed=1
    done
    echo "=== ${#names[@]} stages in $(( $(date +%s) - run_start )) s"
    [ "${#names[@]}" -gt 0 ] || { echo "no stage ran"; exit 1; }
    [ "$failed" -eq 0 ] || { echo "CI FAILED"; exit 1; }
    echo "CI passed"
}

