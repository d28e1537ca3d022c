"""Print the facts of an XProf capture (XSpace ``*.xplane.pb``) that the capture reader's tests assert.

Usage: python facts_of.py PATH [PATH ...] [--json]
PATH is an ``.xplane.pb`` file or a folder searched for them (a TensorBoard log dir).

It reads with TensorFlow's own ``tensorflow.tsl.profiler.protobuf.xplane_pb2`` and nothing of gpuwhy, so
its numbers are an independent ground truth.  Conventions:

* Times: an event starts at ``line.timestamp_ns * 1000 + event.offset_ps`` picoseconds; in every capture here
  that is relative to the capture's start (the ``Task Environment`` plane's ``profile_start_time``, ns since
  the epoch), so the capture's span is ``profile_stop_time - profile_start_time``.  Durations are summed in ps
  and printed in ns (``ps / 1000``, 3 decimals where not whole).
* An event's stats are its own plus its metadata's (its own win); ``ref_value`` stats are resolved to the
  plane's stat-metadata name.
* Step markers: events carrying both ``step_num`` and ``_r`` stats (what ``tf.profiler.experimental.Trace(
  name, step_num=n, _r=1)`` writes).  Events with only one of the two are listed apart.
* TF op kernels on the host: events named ``node_name:OpType`` whose ``OpType`` is a registered TensorFlow op
  (TF's executor names each kernel's TraceMe so).  Eager ops appear instead as ``EagerLocalExecute: OpType``.
* tf.function calls: events named ``EagerLocalExecute: __inference_*``, and events with a ``tf_function_call``
  stat (the Python-side TraceMe of a ``tf.function`` call, named after the Python function).
* Device planes (``/device:*``): a kernel is an event with a ``kernel_details`` stat; memsets have
  ``Memset_details``; copies have ``memcpy_details`` (its ``size:N`` is the bytes).  GEMM-like kernels are those
  whose names contain xmma, hmma, wgmma, imma or gemm (case-insensitive).  The compute stream is each line whose
  name contains ``Compute``; its busy time is the union of its kernels' intervals.
"""

import collections
import json
import os
import re
import statistics
import sys

GEMM = re.compile(r"xmma|hmma|wgmma|imma|gemm", re.IGNORECASE)
OP_KERNEL = re.compile(r"^([^\s:][^\s]*):([A-Za-z_][A-Za-z0-9_]*)$")
PY_INPUT_OPS = ("PyFunc", "EagerPyFunc", "NumpyFunction")


def _quiet_tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    from tensorflow.python.framework import op_def_registry
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    return xplane_pb2, op_def_registry


def _profile_options(raw):
    """The Task Environment's ``profile_options`` bytes, decoded as TSL's ProfileOptions (one line)."""
    if not isinstance(raw, bytes):
        return raw
    from google.protobuf import text_format
    from tensorflow.tsl.profiler.protobuf import profiler_options_pb2

    opts = profiler_options_pb2.ProfileOptions()
    opts.ParseFromString(raw)
    return text_format.MessageToString(opts, as_one_line=True)


def _ns(ps):
    return ps // 1000 if ps % 1000 == 0 else round(ps / 1000, 3)


def _union_ps(intervals):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def _stat_dict(plane, stats):
    out = {}
    for s in stats:
        kind = s.WhichOneof("value")
        if kind is None:
            continue
        v = getattr(s, kind)
        if kind == "ref_value":
            md = plane.stat_metadata.get(v)
            v = md.name if md is not None else v
        key = (
            plane.stat_metadata[s.metadata_id].name
            if s.metadata_id in plane.stat_metadata
            else s.metadata_id
        )
        out[key] = v
    return out


class Event:
    __slots__ = ("plane", "line", "name", "start_ps", "dur_ps", "stats")

    def __init__(self, plane, line, name, start_ps, dur_ps, stats):
        self.plane, self.line, self.name = plane, line, name
        self.start_ps, self.dur_ps, self.stats = start_ps, dur_ps, stats

    @property
    def end_ps(self):
        return self.start_ps + self.dur_ps


def _events(plane):
    md_stats = {k: _stat_dict(plane, m.stats) for k, m in plane.event_metadata.items()}
    for line in plane.lines:
        base = line.timestamp_ns * 1000
        for e in line.events:
            md = plane.event_metadata.get(e.metadata_id)
            stats = dict(md_stats.get(e.metadata_id, {}))
            stats.update(_stat_dict(plane, e.stats))
            yield Event(
                plane.name,
                line.name,
                md.name if md is not None else "",
                base + e.offset_ps,
                e.duration_ps,
                stats,
            )


def _durations(evs):
    d = sorted(e.dur_ps for e in evs)
    return (
        {
            "count": len(d),
            "total_ns": _ns(sum(d)),
            "min_ns": _ns(d[0]),
            "median_ns": _ns(int(statistics.median(d))),
            "max_ns": _ns(d[-1]),
        }
        if d
        else {"count": 0}
    )


def _thread_kind(line_name):  # 'tf_Compute/123' -> 'tf_Compute'
    return line_name.split("/")[0]


def _host_facts(evs, op_def_registry):
    f = {}
    markers = [e for e in evs if "step_num" in e.stats and "_r" in e.stats]
    f["step_markers"] = {
        "count": len(markers),
        "names": dict(collections.Counter(e.name for e in markers)),
        "step_nums": [e.stats["step_num"] for e in sorted(markers, key=lambda e: e.start_ps)],
        "lines": sorted({e.line for e in markers}),
        "durations": _durations(markers),
    }
    only_step = [e for e in evs if "step_num" in e.stats and "_r" not in e.stats]
    f["step_num_without_r"] = {
        "count": len(only_step),
        "names": dict(collections.Counter(e.name for e in only_step)),
        "step_nums": [e.stats["step_num"] for e in sorted(only_step, key=lambda e: e.start_ps)],
        "durations": _durations(only_step),
    }
    f["r_without_step_num"] = dict(
        collections.Counter(e.name for e in evs if "_r" in e.stats and "step_num" not in e.stats)
    )

    inference = [e for e in evs if e.name.startswith("EagerLocalExecute: __inference_")]
    f["eager_local_execute_inference"] = {
        n: {"count": len(g), "total_ns": _ns(sum(e.dur_ps for e in g))}
        for n, g in _group(inference).items()
    }
    tfc = [e for e in evs if "tf_function_call" in e.stats]
    f["tf_function_call_events"] = {
        n: {
            "count": len(g),
            "tf_function_call": dict(
                collections.Counter(str(e.stats["tf_function_call"]) for e in g)
            ),
            "durations": _durations(g),
        }
        for n, g in _group(tfc).items()
    }

    kernels = collections.defaultdict(list)
    for e in evs:
        m = OP_KERNEL.match(e.name)
        if m and "::" not in e.name and op_def_registry.get(m.group(2)) is not None:
            kernels[m.group(2)].append(e)
    f["tf_op_kernels"] = {
        t: {
            "count": len(g),
            "total_ns": _ns(sum(e.dur_ps for e in g)),
            "threads": sorted({_thread_kind(e.line) for e in g}),
        }
        for t, g in sorted(kernels.items(), key=lambda kv: (-sum(e.dur_ps for e in kv[1]), kv[0]))
    }
    f["tf_op_kernel_events"] = sum(len(g) for g in kernels.values())
    eager = [
        e.name[len("EagerLocalExecute: ") :]
        for e in evs
        if e.name.startswith("EagerLocalExecute: ")
        and not e.name.startswith("EagerLocalExecute: __inference_")
    ]
    f["eager_ops"] = dict(sorted(collections.Counter(eager).items()))

    gn = [e for e in evs if e.name == "IteratorGetNextOp::DoCompute"]
    f["iterator_get_next"] = dict(
        _durations(gn), threads=sorted({_thread_kind(e.line) for e in gn})
    )
    f["tf_data_iterator_events"] = {
        n: {
            "count": len(g),
            "total_ns": _ns(sum(e.dur_ps for e in g)),
            "threads": sorted({_thread_kind(e.line) for e in g}),
        }
        for n, g in _group([e for e in evs if e.name.startswith("Iterator::")]).items()
    }
    py = {}
    for op in PY_INPUT_OPS:
        g = list(kernels.get(op, []))
        if g:
            py[op] = dict(
                _durations(g),
                threads=sorted({_thread_kind(e.line) for e in g}),
                over_1ms=sum(e.dur_ps > 10**9 for e in g),
            )
    f["python_ops_in_graph"] = py
    f["python_tracer_events"] = sum(e.name.startswith("$") for e in evs)
    return f


def _group(evs):
    g = collections.defaultdict(list)
    for e in evs:
        g[e.name].append(e)
    return dict(sorted(g.items()))


def _device_facts(plane, evs, span_ps):
    f = {"stats": dict(_stat_dict(plane, plane.stats))}
    lines = collections.defaultdict(list)
    for e in evs:
        lines[e.line].append(e)
    f["lines"] = {
        ln.name: {
            "events": len(ln.events),
            "total_ns": _ns(sum(e.dur_ps for e in lines[ln.name])),
            "union_ns": _ns(_union_ps([(e.start_ps, e.end_ps) for e in lines[ln.name]])),
        }
        for ln in plane.lines
    }
    if evs:
        f["events_extent_ns"] = [_ns(min(e.start_ps for e in evs)), _ns(max(e.end_ps for e in evs))]
    kern = [e for e in evs if "kernel_details" in e.stats]
    f["kernels"] = {
        "count": len(kern),
        "total_ns": _ns(sum(e.dur_ps for e in kern)),
        "distinct_names": len({e.name for e in kern}),
    }
    f["memsets"] = _durations([e for e in evs if "Memset_details" in e.stats])
    f["other_events"] = dict(
        collections.Counter(
            e.name
            for e in evs
            if not ({"kernel_details", "Memset_details", "memcpy_details"} & e.stats.keys())
        )
    )
    mods = collections.defaultdict(list)
    for e in kern:
        mods[str(e.stats.get("hlo_module", "<none>"))].append(e)
    f["hlo_module_kernels"] = {
        m: {"kernels": len(g), "kernel_ns": _ns(sum(e.dur_ps for e in g))}
        for m, g in sorted(mods.items())
    }
    f["hlo_module_all_events"] = dict(
        sorted(
            collections.Counter(
                str(e.stats["hlo_module"]) for e in evs if "hlo_module" in e.stats
            ).items()
        )
    )
    gemm = [e for e in kern if GEMM.search(e.name)]
    f["gemm_like_kernels"] = {
        n: {"count": len(g), "total_ns": _ns(sum(e.dur_ps for e in g))}
        for n, g in _group(gemm).items()
    }
    f["gemm_like_total"] = {
        "count": len(gemm),
        "total_ns": _ns(sum(e.dur_ps for e in gemm)),
        "lowercase_match_only": len(
            [e for e in kern if re.search("xmma|hmma|wgmma|imma|gemm", e.name)]
        ),
    }
    copies = {}
    for name in sorted({e.name for e in evs if "memcpy_details" in e.stats}):
        g = [e for e in evs if e.name == name and "memcpy_details" in e.stats]
        sizes, kinds = [], collections.Counter()
        for e in g:
            d = dict(kv.split(":", 1) for kv in str(e.stats["memcpy_details"]).split() if ":" in kv)
            sizes.append(int(d.get("size", 0)))
            kinds[f"{d.get('kind_src')}->{d.get('kind_dst')}"] += 1
        copies[name] = {
            "count": len(g),
            "bytes": sum(sizes),
            "sizes": dict(sorted(collections.Counter(sizes).items())),
            "kinds": dict(kinds),
            "total_ns": _ns(sum(e.dur_ps for e in g)),
            "lines": sorted({e.line for e in g}),
        }
    f["copies"] = copies
    comp = {}
    for ln in plane.lines:
        if "Compute" not in ln.name:
            continue
        k = [e for e in lines[ln.name] if "kernel_details" in e.stats]
        u = _union_ps([(e.start_ps, e.end_ps) for e in k])
        ua = _union_ps([(e.start_ps, e.end_ps) for e in lines[ln.name]])
        comp[ln.name] = {
            "kernels": len(k),
            "kernel_sum_ns": _ns(sum(e.dur_ps for e in k)),
            "kernel_union_ns": _ns(u),
            "all_events_union_ns": _ns(ua),
            "first_kernel_start_ns": _ns(min(e.start_ps for e in k)) if k else None,
            "last_kernel_end_ns": _ns(max(e.end_ps for e in k)) if k else None,
            "kernel_union_over_span": round(u / span_ps, 5) if span_ps else None,
        }
    f["compute_streams"] = comp
    return f


def facts(path):
    xplane_pb2, op_def_registry = _quiet_tf()
    xs = xplane_pb2.XSpace()
    with open(path, "rb") as fh:
        xs.ParseFromString(fh.read())
    f = {
        "file": path,
        "bytes": os.path.getsize(path),
        "hostnames": list(xs.hostnames),
        "errors": list(xs.errors),
        "warnings": list(xs.warnings),
    }
    env = next((p for p in xs.planes if p.name == "Task Environment"), None)
    env_stats = _stat_dict(env, env.stats) if env is not None else {}
    start, stop = env_stats.get("profile_start_time"), env_stats.get("profile_stop_time")
    f["profile_start_time_ns"], f["profile_stop_time_ns"] = start, stop
    span_ps = (stop - start) * 1000 if start is not None and stop is not None else None
    f["span_ns"] = span_ps // 1000 if span_ps is not None else None
    f["profile_options"] = _profile_options(env_stats.get("profile_options"))
    all_evs, planes = {}, []
    for p in xs.planes:
        evs = list(_events(p))
        all_evs[p.name] = evs
        st = _stat_dict(p, p.stats)
        planes.append(
            {
                "name": p.name,
                "lines": len(p.lines),
                "events": len(evs),
                "line_names": [ln.name for ln in p.lines],
                "line_events": [len(ln.events) for ln in p.lines],
                "line_timestamp_ns": [ln.timestamp_ns for ln in p.lines],
                "stats": {
                    k: (f"<{len(v)} bytes>" if isinstance(v, bytes) else v)
                    for k, v in st.items()
                    if isinstance(k, str)
                },
                "unnamed_stats": sum(not isinstance(k, str) for k in st),
            }
        )
    f["planes"] = planes
    every = [e for evs in all_evs.values() for e in evs]
    if every:
        f["events_extent_ns"] = [
            _ns(min(e.start_ps for e in every)),
            _ns(max(e.end_ps for e in every)),
        ]
    f["host"] = {
        p.name: _host_facts(all_evs[p.name], op_def_registry)
        for p in xs.planes
        if p.name.startswith("/host:") and all_evs[p.name]
    }
    f["devices"] = {
        p.name: _device_facts(p, all_evs[p.name], span_ps)
        for p in xs.planes
        if p.name.startswith("/device:")
    }
    return f


def _paths(args):
    for a in args:
        if os.path.isdir(a):
            for root, _, files in sorted(os.walk(a)):
                for n in sorted(files):
                    if n.endswith(".xplane.pb"):
                        yield os.path.join(root, n)
        else:
            yield a


def _print(f):
    w = print
    w(f"== {f['file']}  ({f['bytes']} bytes)")
    w(f"hostnames {f['hostnames']}  errors {f['errors']}  warnings {f['warnings']}")
    w(
        f"profile_start_time {f['profile_start_time_ns']}  profile_stop_time {f['profile_stop_time_ns']}  "
        f"span {f['span_ns']} ns  events extent {f.get('events_extent_ns')} ns  profile_options {f['profile_options']!r}"
    )
    for p in f["planes"]:
        w(
            f"plane {p['name']!r}: {p['lines']} lines, {p['events']} events"
            + (f", stats {p['stats']}" if p["stats"] else "")
            + (f", +{p['unnamed_stats']} stats with no metadata" if p["unnamed_stats"] else "")
        )
        for n, c, t in zip(p["line_names"], p["line_events"], p["line_timestamp_ns"]):
            w(f"    line {n!r}: {c} events, timestamp_ns {t}")
    for name, h in f["host"].items():
        w(f"-- host plane {name}")
        for k, v in h.items():
            if isinstance(v, dict) and len(v) > 3:
                w(f"  {k}:")
                for kk, vv in v.items():
                    w(f"      {kk}: {vv}")
            else:
                w(f"  {k}: {v}")
    for name, d in f["devices"].items():
        w(f"-- device plane {name}")
        for k, v in d.items():
            if (
                isinstance(v, dict)
                and v
                and k not in ("stats", "kernels", "memsets", "gemm_like_total")
            ):
                w(f"  {k}:")
                for kk, vv in v.items():
                    w(f"      {kk}: {vv}")
            else:
                w(f"  {k}: {v}")


def main(argv):
    as_json = "--json" in argv
    out = [facts(p) for p in _paths([a for a in argv[1:] if a != "--json"])]
    if as_json:
        json.dump(out, sys.stdout, indent=1, default=str)
        print()
    else:
        for f in out:
            _print(f)
            print()


if __name__ == "__main__":
    main(sys.argv)
