#!/bin/sh
# gpuwhy's CI gate (docs/ci.md): runs the project's short training script under
# `gpuwhy run --target GPU` and compares its record with the baseline record kept in the
# repository (`gpuwhy diff`). Both reports are always written; the exit status is the
# worse of the two commands' (0: the gate passed).
#
#   sh examples/ci/gpuwhy_gate.sh [SCRIPT ARGS...]                    gate (CI jobs)
#   sh examples/ci/gpuwhy_gate.sh --record-baseline [SCRIPT ARGS...]  write the baseline
#
# One script for every CI system: .github and .gitlab-ci only install, call it and keep
# what it writes. Settings (environment variables; lists are space-separated):
#   GPUWHY_SCRIPT        the training script             (examples/ci/train_short.py)
#   GPUWHY_BASELINE      the baseline record, committed  (examples/ci/gpuwhy-baseline.json)
#   GPUWHY_TARGET        GPU to project the step onto    (T4)
#   GPUWHY_RUN_FAIL_ON   gpuwhy run --fail-on: severity  (high; empty: none)
#   GPUWHY_DIFF_FAIL_ON  gpuwhy diff --fail-on list      (step:+5% projected:+5% new:medium; empty: none)
#   GPUWHY_FAIL_IGNORE   --fail-ignore list, both gates  (env.no-gpu: a CPU runner's)
#   GPUWHY_OUT           where the reports go            (gpuwhy-out)
#   GPUWHY_NOISE         a calibration to judge against  (none; gpuwhy diff --noise)
#   GPUWHY_RUNS          runs of the script a side       (3; 1: one record a side)
#                        with N > 1 the baseline is N records beside GPUWHY_BASELINE's
#                        name (gpuwhy-baseline-1.json ...), compared as several a side
#   GPUWHY               the gpuwhy command              (gpuwhy; or: python -m gpuwhy)
set -eu
set -f # lists hold patterns ('env.*'): never glob them

gpuwhy=${GPUWHY:-gpuwhy} # split into words: "python -m gpuwhy" works
script=${GPUWHY_SCRIPT:-examples/ci/train_short.py}
baseline=${GPUWHY_BASELINE:-examples/ci/gpuwhy-baseline.json}
target=${GPUWHY_TARGET:-T4}
run_fail_on=${GPUWHY_RUN_FAIL_ON-high}
diff_fail_on=${GPUWHY_DIFF_FAIL_ON-step:+5% projected:+5% new:medium}
fail_ignore=${GPUWHY_FAIL_IGNORE-env.no-gpu}
out=${GPUWHY_OUT:-gpuwhy-out}
runs=${GPUWHY_RUNS:-3}
noise=${GPUWHY_NOISE:-}

record=false
if [ "${1:-}" = "--record-baseline" ]; then
    record=true
    shift
fi

mkdir -p "$out"
set +f # the last run's numbered records and reports, gone
rm -f "$out"/current-[0-9]*.json "$out"/report-[0-9]*.html
set -f
rm -f "$out/current.json" "$out/report.html" "$out/run.log" "$out/diff.json" \
    "$out/diff.txt" "$out/diff.log" "$out/gate.txt" "$out/gate.junit.xml" "$out/.run-status"

ignore_options=""
for id in $fail_ignore; do ignore_options="$ignore_options --fail-ignore $id"; done
run_options=""
if [ "$record" = false ]; then
    for severity in $run_fail_on; do run_options="$run_options --fail-on $severity"; done
    run_options="$run_options$ignore_options"
fi

# The run: the script's stdout as it is; its stderr and gpuwhy's report (with the gate's
# lines) to the log and to run.log. The status goes through a file: a pipeline's is tee's.
echo "gpuwhy gate: gpuwhy run --repeat $runs --target $target$run_options $script${*:+ $*}" >&2
{
    {
        # shellcheck disable=SC2086 # the option lists are meant to split into words
        $gpuwhy run --repeat "$runs" --target "$target" --json "$out/current.json" \
            --html "$out/report.html" $run_options "$script" "$@" 2>&1 1>&3 3>&- ||
            echo $? >"$out/.run-status"
    } | tee "$out/run.log" >&2
} 3>&1
run_status=$(cat "$out/.run-status" 2>/dev/null || echo 0)
rm -f "$out/.run-status"

# N runs: gpuwhy wrote current-1.json ... current-N.json (report-1.html ...); the last
# run's are also current.json and report.html, the files the configs keep
current="$out/current.json"
base_records=$baseline
first_baseline=$baseline
if [ "$runs" -gt 1 ]; then
    current="$out/current-*.json" # a pattern: gpuwhy diff expands it (this shell does not)
    base_records="${baseline%.json}-*.json"
    first_baseline="${baseline%.json}-1.json"
    last=""
    i=1
    while [ "$i" -le "$runs" ]; do
        if [ -s "$out/current-$i.json" ]; then last=$i; fi
        i=$((i + 1))
    done
    if [ -n "$last" ]; then
        cp "$out/current-$last.json" "$out/current.json"
        cp "$out/report-$last.html" "$out/report.html" 2>/dev/null || true
    fi
fi

if [ "$record" = true ]; then
    if [ "$run_status" != 0 ] || [ ! -s "$out/current.json" ]; then
        echo "gpuwhy gate: the script failed (exit $run_status): $baseline left as it was" >&2
        exit "$run_status"
    fi
    mkdir -p "$(dirname "$baseline")"
    if [ "$runs" -gt 1 ]; then
        if [ -f "$first_baseline" ]; then
            $gpuwhy diff "$base_records" -- "$current" || true # for the reviewer
        fi
        set +f
        rm -f "${baseline%.json}"-[0-9]*.json
        set -f
        i=1
        while [ "$i" -le "$runs" ]; do
            cp "$out/current-$i.json" "${baseline%.json}-$i.json"
            i=$((i + 1))
        done
        echo "gpuwhy gate: baseline written to ${baseline%.json}-1.json ... -$runs.json:" \
            "commit them" >&2
        exit 0
    fi
    if [ -f "$baseline" ]; then
        # what the new baseline changes, for the commit's reviewer (never fails here)
        $gpuwhy diff "$baseline" "$out/current.json" || true
    fi
    cp "$out/current.json" "$baseline"
    echo "gpuwhy gate: baseline written to $baseline: commit it" >&2
    exit 0
fi

# The comparison: the report to diff.txt (and the log), the gate's lines to diff.log.
diff_status=0
if [ ! -s "$out/current.json" ]; then
    echo "gpuwhy gate: gpuwhy run wrote no record (exit $run_status): nothing to compare" \
        >"$out/diff.log"
    diff_status=2
elif [ ! -f "$first_baseline" ]; then
    echo "gpuwhy gate: no baseline record at $base_records: record one on this runner" \
        "type with 'sh $0 --record-baseline' and commit it" >"$out/diff.log"
    diff_status=2
else
    diff_options=""
    for condition in $diff_fail_on; do diff_options="$diff_options --fail-on $condition"; done
    if [ -n "$noise" ]; then diff_options="$diff_options --noise $noise"; fi
    # shellcheck disable=SC2086
    $gpuwhy diff $diff_options $ignore_options --json "$out/diff.json" -o "$out/diff.txt" \
        "$base_records" -- "$current" 2>"$out/diff.log" || diff_status=$?
    cat "$out/diff.txt" 2>/dev/null || true
fi
cat "$out/diff.log" >&2

status=$run_status
if [ "$diff_status" -gt "$status" ]; then status=$diff_status; fi
if [ "$status" = 0 ]; then
    outcome="passed"
else
    outcome="FAILED"
fi

# gate.txt: what a CI summary shows; gate.junit.xml: the same for a test-report view.
{
    grep '^gpuwhy: gate: ' "$out/run.log" || true
    cat "$out/diff.log"
    sed -n '1s/^[^A-Za-z]*//p' "$out/diff.txt" 2>/dev/null || true
    echo "gpuwhy gate: $outcome (gpuwhy run exit $run_status, gpuwhy diff exit $diff_status)"
} >"$out/gate.txt"
xml() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'; }
testcase() { # name, exit status, file of its lines
    printf '  <testcase classname="gpuwhy" name="%s">' "$(printf '%s' "$1" | xml)"
    if [ "$2" != 0 ]; then
        printf '<failure message="exit %s">%s</failure>' "$2" "$(xml <"$3")"
    fi
    printf '</testcase>\n'
}
grep '^gpuwhy: gate: ' "$out/run.log" >"$out/.run-gate" || echo "exit $run_status" >"$out/.run-gate"
failures=0
if [ "$run_status" != 0 ]; then failures=1; fi
if [ "$diff_status" != 0 ]; then failures=$((failures + 1)); fi
{
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuite name=\"gpuwhy gate\" tests=\"2\" failures=\"$failures\">"
    testcase "gpuwhy run --fail-on $run_fail_on: $script" "$run_status" "$out/.run-gate"
    testcase "gpuwhy diff --fail-on $diff_fail_on: against $baseline" "$diff_status" "$out/diff.log"
    echo '</testsuite>'
} >"$out/gate.junit.xml"
rm -f "$out/.run-gate"

echo "gpuwhy gate: $outcome (gpuwhy run exit $run_status, gpuwhy diff exit $diff_status)" >&2
exit "$status"
