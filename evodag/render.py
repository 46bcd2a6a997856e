"""Plain-text and JSON rendering of the `evo-dag` documents (the dicts built by `evodag.queries`).

Text is plain (no colour, no box drawing) so it reads the same in a terminal, a pipe or an agent's
context window. JSON is stable: sorted keys, two-space indent.
"""

from __future__ import annotations

import json
from typing import Any

from evodag.metric import MetricScale, scale_of, score_text


def to_json(doc: Any) -> str:
    """The stable JSON form of a document."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _score(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "-"
    return _num(mean) if std is None else f"{_num(mean)} ± {_num(std)}"


def node_line(n: dict[str, Any] | None, scale: MetricScale | None = None) -> str:
    """`#id status commit dev x ± s test y lines n`, or `-`; with the run's metric `scale`, each score is also shown
    as the metric it stands for (`dev 0.500 ± 0.000 (110 ms)`)."""
    if n is None:
        return "-"

    def shown(mean: float | None, std: float | None) -> str:
        return _score(mean, std) + (f" ({score_text(mean, scale)})" if scale is not None and mean is not None else "")

    test = "" if n.get("test_mean") is None else f"  test {shown(n['test_mean'], n.get('test_std'))}"
    return (
        f"#{n['id']} {n['status']:<8} {str(n['commit'])[:10]}  dev {shown(n['dev_mean'], n.get('dev_std'))}"
        f"{test}  lines {n['lines_changed']}"
    )


def _ref(node_id: int | None) -> str:
    """`#id` of a node, `-` for none (an iteration without a candidate yet, or without a parent)."""
    return "-" if node_id is None else f"#{node_id}"


def _iteration_line(it: dict[str, Any] | None) -> str:
    if it is None:
        return "iteration: none yet"
    mode = " exploration" if it["exploration"] else ""
    return (
        f"iteration {it['number']} (epoch {it['epoch']}, {it['phase'] or '-'}{mode}): step {it['step']}, "
        f"decision {it['decision'] or '-'}, parent {_ref(it['parent_id'])}, candidate {_ref(it['candidate_id'])}, "
        f"stall {it['stall_count']}"
    )


def _infra(rollouts: dict[str, Any]) -> str:
    errors = rollouts.get("infra_errors", 0)
    return f", {errors} infra errors (counted nowhere)" if errors else ""


def summary_text(doc: dict[str, Any]) -> str:
    run = doc["run"]
    counts = ", ".join(f"{k} {v}" for k, v in doc["nodes"]["by_status"].items()) or "none"
    lines = [
        f"run {run['id']}  {run['status']}  seed {run['seed']}  started {run['started_at']}"
        + (f"  finished {run['finished_at']} ({run['termination_reason']})" if run["finished_at"] else ""),
        f"nodes {doc['nodes']['total']}: {counts}",
        f"rollouts {doc['rollouts']['count']} (${doc['rollouts']['cost']:.4f}){_infra(doc['rollouts'])}   "
        f"sessions {doc['sessions']['count']} (${doc['sessions']['cost']:.4f})",
        f"baseline {node_line(doc['baseline'], _scales(doc)[0])}",
        f"best     {node_line(doc['best'], _scales(doc)[0])}",
        _iteration_line(doc["iteration"]),
    ]
    decisions = [
        f"{d['number']}:{d['decision']} ({_ref(d['parent_id'])}->{_ref(d['candidate_id'])})"
        for d in doc["recent_decisions"]
    ]
    lines.append("recent decisions: " + (", ".join(decisions) or "none"))
    return "\n".join(lines)


def _lesson_line(les: dict[str, Any]) -> str:
    where = [
        f"node #{les['node_id']}" if les["node_id"] is not None else "",
        f"edge {les['edge_id']}" if les["edge_id"] else "",
    ]
    task = f" [{les['task_id']}]" if les["task_id"] else ""
    place = ", ".join(w for w in where if w)
    place = f" ({place})" if place else ""
    return f"  {les['id']}. {les['category']}/{les['attribution']}{task}{place}: {les['text']}"


def node_text(doc: dict[str, Any]) -> str:
    n = doc["node"]
    edge = doc["edge_in"]
    scale, batch = _scales(doc)
    lines = [
        node_line(n, scale),
        f"iteration {n['iteration']}  phase {n['phase']}  patch {n['patch_kind']}  origin {n['origin']}",
        f"parent {'#' + str(n['parent_id']) if n['parent_id'] is not None else '-'}"
        + (f" via {edge['kind']} (+{edge['lines_added']} -{edge['lines_removed']})" if edge else "")
        + f"  children {', '.join('#' + str(c) for c in doc['children']) or '-'}",
        f"batch {_batch(n['batch_before'], n['batch_after'], batch)}  status reason: {n['status_reason'] or '-'}",
    ]
    if n["hypothesis"]:
        lines.append("hypothesis: " + json.dumps(n["hypothesis"], sort_keys=True, ensure_ascii=False))
    for split, r in doc["rollouts"].items():
        lines.append(f"rollouts {split}: {r['passes']}/{r['runs']} passed, mean score {_num(r['mean_score'])}")
    if doc["lessons"]:
        lines.append("lessons:")
        lines += [_lesson_line(les) for les in doc["lessons"]]
    return "\n".join(lines)


def _transitions(edge: dict[str, Any]) -> list[str]:
    return [f"{k}: {', '.join(edge[k]) or '-'}" for k in ("fixed", "regressed", "still_failing", "still_passing")]


def edge_text(doc: dict[str, Any]) -> str:
    e = doc["edge"]
    src = f" (from edge {e['source_edge_id']})" if e["source_edge_id"] is not None else ""
    lines = [
        f"edge {e['id']}: #{e['parent_id']} -> #{e['child_id']}  {e['kind']}{src}"
        f"  +{e['lines_added']} -{e['lines_removed']}",
        f"files: {', '.join(e['files_changed']) or '-'}",
        *_transitions(e),
    ]
    if doc["lessons"]:
        lines.append("lessons:")
        lines += [_lesson_line(les) for les in doc["lessons"]]
    return "\n".join([*lines, "", doc["diff"].rstrip("\n")])


def scenario_text(doc: dict[str, Any]) -> str:
    group = f" (group {doc['task_group']})" if doc["task_group"] else ""
    lines = [f"task {doc['task_id']}{group} in run {doc['run_id']}"]
    for n in doc["nodes"]:
        lines.append(f"#{n['node_id']} {n['status']} iter {n['iteration']}: {n['passes']}/{n['runs']} passed")
        for o in n["outcomes"]:
            mark = "PASS" if o["passed"] else "FAIL"
            extra = "" if o["passed"] else f"  {o['disposition']}: {o['rationale'] or '-'}"
            extra += f" [{o['failure_file']}]" if o["failure_file"] else ""
            lines.append(f"    {o['split']}/rep {o['repetition']} seed {o['seed']}: {mark} {_num(o['score'])}{extra}")
    lines.append("lessons:" if doc["lessons"] else "lessons: none")
    lines += [_lesson_line(les) for les in doc["lessons"]]
    return "\n".join(lines + _registry_lines(doc))


def _registry_lines(doc: dict[str, Any]) -> list[str]:
    lines = ["root causes:" if doc["root_causes"] else "root causes: none"]
    for rc in doc["root_causes"]:
        iters = ", ".join(str(i) for i in rc["iterations"]) or "-"
        kinds = "/".join(rc["categories"]) + " " + "/".join(rc["attributions"])
        lines.append(f"  - {rc['text']}  ({kinds}, ×{rc['count']}, iteration {iters})")
    lines.append("failure signatures (train):" if doc["failure_signatures"] else "failure signatures (train): none")
    for sig in doc["failure_signatures"]:
        nodes = ", ".join(f"#{n}" for n in sig["nodes"])
        lines.append(f"  - {sig['signature']}  ×{sig['count']} on {nodes}: {sig['example'] or '-'}")
    lines.append("attempts:" if doc["attempts"] else "attempts: none")
    for a in doc["attempts"]:
        target = " targeted" if a["targeted"] else ""
        why = f" [{a['attribution']}]" if a["attribution"] else ""
        lines.append(
            f"  - iter {a['iteration']} edge {a['edge_id']} #{a['parent_id']}->#{a['child_id']} {a['kind']} "
            f"{a['origin']}{target}: {a['transition']}{why}; {a['status']}: {a['reason'] or '-'}"
        )
        if a["plan"]:
            lines.append(f"      plan: {a['plan']}")
    files = [f"{f['file']} (fixed {f['fixed']}, regressed {f['regressed']})" for f in doc["sensitive_files"]]
    lines.append("sensitive files: " + ("; ".join(files) or "none"))
    return lines


def _batch(before: float | None, after: float | None, scale: MetricScale | None) -> str:
    return f"{score_text(before, scale, missing='-')} -> {score_text(after, scale, missing='-')}"


def _scales(doc: dict[str, Any]) -> tuple[MetricScale | None, MetricScale | None]:
    """(the scale of dev/test scores, the scale of batch scores) of a document with `metric_keys`."""
    scale = scale_of(doc.get("metric"))
    return scale, scale if doc.get("batch_metric") else None


def _history_line(it: dict[str, Any], scale: MetricScale | None, batch: MetricScale | None) -> list[str]:
    mode = " (exploration)" if it["exploration"] else ""
    parent = _ref(it["parent_id"])
    cand = _ref(it["candidate_id"])
    decision = it["decision"] or ("running" if not it["finished"] else "-")
    dev = f"  dev {score_text(it['candidate_dev'], scale, missing='-')}" if it["candidate_dev"] is not None else ""
    origin = f"  {it['origin']}" if it["origin"] else ""
    lines = [
        f"{it['number']:>4} {it['phase'] or '-'}{mode} {parent} -> {cand}  {decision}"
        f"  batch {_batch(it['batch_before'], it['batch_after'], batch)}{dev}{origin}",
        f"       batch: {', '.join(it['batch']) or '-'}",
    ]
    for move in it.get("phase_moves", []):
        how = "by the schedule" if move["scheduled"] else "after no patch" if move.get("widened") else "on evidence"
        lines.append(f"       phase: {move['from']} -> {move['to']} {how}: {move['reason'] or '-'}")
    if it["evolution"]:
        lines.append(f"       evolution: {it['evolution']['action']}: {it['evolution']['rationale'] or '-'}")
    if it["intent"] and (not it["evolution"] or it["intent"] != it["evolution"]["rationale"]):
        lines.append(f"       intent: {it['intent']}")
    if it["reason"]:
        lines.append(f"       reason: {it['reason']}")
    ev = it.get("evidence")
    if ev and ev["rounds"]:
        tasks = sum(len(r) for r in ev["rounds"])
        lines.append(
            f"       evidence: {len(ev['rounds'])} round(s) on {tasks} more task(s), {ev['rollouts']} rollout(s); "
            f"P(better) {_num(ev['confidence'])}; {ev['stopped']}"
        )
    return lines


def history_text(doc: dict[str, Any]) -> str:
    its = doc["iterations"]
    scale, batch = _scales(doc)
    unit = f"; scores shown as {scale.label}" if scale is not None else ""
    lines = [f"run {doc['run_id']}: {len(its)} iteration(s)" + ("" if its else " yet") + unit]
    earlier = doc.get("earlier")
    if earlier and earlier["iterations"]:
        decided = ", ".join(f"{k} {v}" for k, v in earlier["decisions"].items())
        kept = "; ".join(
            f"{k['number']}: #{k['candidate_id']} {k['origin']} dev "
            + score_text(k["candidate_dev"], scale, missing="-")
            for k in earlier["kept"]
        )
        lines[0] += " shown in full"
        lines.append(f"earlier: iterations {earlier['first']}-{earlier['last']} ({earlier['iterations']}): {decided}")
        lines.append(f"  latest kept before them: {kept or 'none'}")
    for it in its:
        lines += _history_line(it, scale, batch)
    for task, reg in doc.get("tasks", {}).items():
        lines.append(
            f"task {task}: {reg['attempts_total']} attempt(s) "
            f"({', '.join(f'{k} {v}' for k, v in reg['attempt_outcomes'].items()) or 'none'}); "
            f"{reg['root_causes_total']} root cause(s), {reg['failure_signatures_total']} failure signature(s); "
            "the most frequent and the latest:"
        )
        lines += ["  " + line for line in _registry_lines(reg)]
    return "\n".join(lines)


def lessons_text(doc: dict[str, Any]) -> str:
    head = f"{len(doc['lessons'])} lesson(s)" + (f", the latest of {doc['total']}" if "total" in doc else "")
    return "\n".join([head, *(_lesson_line(les) for les in doc["lessons"])])


def lineage_text(doc: dict[str, Any]) -> str:
    return "\n".join(f"{'  ' * i}{s['edge_kind'] or 'root'} -> {node_line(s)}" for i, s in enumerate(doc["lineage"]))


def best_text(doc: dict[str, Any]) -> str:
    if doc["best"] is None:
        return "the run has not recorded a best node yet"
    path = " -> ".join(f"#{n['id']}" for n in doc["path"])
    return f"best: {node_line(doc['best'])}\npath: {path}"


def _status(s: dict[str, Any]) -> str:
    return s["status"] if s["runs"] == 0 else f"{s['status']} {s['passes']}/{s['runs']} ({_num(s['mean_score'])})"


def batch_text(doc: dict[str, Any]) -> str:
    it = doc["iteration"]
    if it is None:
        return "no iteration yet"
    lines = [_iteration_line(it), f"{'task':<24} {'parent':<22} candidate"]
    lines += [f"{t['task_id']:<24} {_status(t['parent']):<22} {_status(t['candidate'])}" for t in doc["tasks"]]
    return "\n".join(lines)


def diff_text(doc: dict[str, Any]) -> str:
    lines = [f"#{doc['a']} vs #{doc['b']}: {doc['relation']}, common ancestor {doc['common_ancestor']}"]
    for seg in doc["segments"]:
        lines.append(f"=== {seg['label']} ({len(seg['steps'])} edge(s))")
        for st in seg["steps"]:
            lines.append(f"--- edge {st['edge_id']} #{st['parent_id']} -> #{st['child_id']} {st['kind']}")
            lines.append(st["diff"].rstrip("\n"))
    return "\n".join(lines)


def graph_text(doc: dict[str, Any]) -> str:
    """`evo-dag graph`: one line per node (status, phase, dev) and per edge (kind, lines)."""
    scale = scale_of(doc.get("metric"))
    lineage = set(doc["best_lineage"])
    lines = [f"run {doc['run_id']} ({doc['status']}): {len(doc['nodes'])} node(s), {len(doc['edges'])} edge(s); "
             f"best #{doc['best_id']}, * = on the best's lineage"]  # fmt: skip
    for n in doc["nodes"]:
        mark = "*" if n["id"] in lineage else " "
        dev = score_text(n["dev_mean"], scale, missing="-")
        lines.append(f"{mark}#{n['id']:<5} {n['status']:<9} {n['phase']:<10} dev {dev}  {n['title']}".rstrip())
    lines += [f"  #{e['parent_id']} -> #{e['child_id']} {e['kind']} +{e['lines_added']} -{e['lines_removed']}"
              for e in doc["edges"]]  # fmt: skip
    return "\n".join(lines)


def progress_text(doc: dict[str, Any]) -> str:
    """`evo-dag progress`: per finished iteration the best node then, its dev, search rollouts and cost so far."""
    scale = scale_of(doc.get("metric"))
    lines = [f"{'it':>4} {'decision':<20} {'best':>6} {'best dev':>9} {'rollouts':>9} {'cost':>10}"]
    for p in doc["points"]:
        best = f"#{p['best_id']}" if p["best_id"] is not None else "-"
        dev = score_text(p["best_dev"], scale, missing="-")
        lines.append(f"{p['iteration']:>4} {p['decision'] or '-':<20} {best:>6} {dev:>9} {p['rollouts']:>9} "
                     f"{p['cost']:>10.4f}")  # fmt: skip
    return "\n".join(lines)
