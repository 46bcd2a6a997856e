"""Step 1 of an iteration: evolution picks the parent from the whole DAG, and never aborts the run.

The answer is checked against the store (`evolution_request.answer_error`). An invalid answer is asked again once, with
the error stated in `retry_reason`; a failed session is retried up to `sessions.retries` times; after that the
iteration continues from the current node. Every call is a paid attempt keyed `(iteration, evolution, attempt)`.
A cherry-pick / revert node is dev-evaluated and kept only if it is not worse than its base on dev; the nodes it
was built through (one per edge) share its verdict. No session is paid for when nothing changed since the last
evolution (`_nothing_to_decide`): the iteration continues from the current node, and the history says so.
"""

from __future__ import annotations

from collections.abc import Callable

from evodag.decisions import INVALID, KEPT_DECISIONS
from evodag.models import Iteration, Node
from saddler.run import audit, evolution_request, transplant
from saddler.run.context import RunContext
from saddler.run.session_calls import failure_reason, worth_asking_again
from saddler.scoring import figure
from saddler.sessions.schema import EvolutionRequest, EvolutionResult

Say = Callable[[str], None]
INVALID_ANSWER_RETRIES = 1


def evolve(ctx: RunContext, it: Iteration, current: Node, say: Say) -> Node:
    """The parent of iteration `it`: `current` (continue), another kept node (rebase), or a new cherry-pick /
    revert node when it is kept."""
    if it.number == 1 or ctx.cfg.policies.evolution == "continue":
        return current
    unchanged = _nothing_to_decide(ctx, current)
    if unchanged:
        rationale = f"continue from the latest kept node n{current.id} without a session: {unchanged}"
        payload = {"iteration": it.number, "action": "continue", "key": "continue", "rationale": rationale, "error": ""}
        payload |= {"session": False, "last_node": ctx.store.last_node_id(ctx.run_id)}
        ctx.store.log_event("evolution.action", payload, run_id=ctx.run_id)
        say(f"iter {it.number:>3} evolution: {rationale}")
        return current
    request = evolution_request.build_request(
        ctx.store, ctx.run_id, it.number, current, ctx.best(), ctx.session_paths(), ctx.cfg.policies.evolution_bases
    )
    result = _answer(ctx, it, request, current)
    base = ctx.store.get_node(result.parent_node_id)
    made = transplant.apply_action(ctx.store, ctx.space, ctx.run_id, it.number, it.phase, result)
    ctx.store.log_event(
        "evolution.action",
        {
            "iteration": it.number,
            "action": result.action,
            "key": made.key if made else transplant.action_key(result),
            "rationale": result.rationale,
            "error": made.error if made else "",
            "session": True,
            "last_node": ctx.store.last_node_id(ctx.run_id),
        },
        run_id=ctx.run_id,
    )
    say(f"iter {it.number:>3} evolution: {result.rationale}" + (f" ({made.error})" if made and made.error else ""))
    if made is None or made.node is None:
        return base
    node = _judge(ctx, it, result, base, made.nodes)
    return node if node.status in KEPT_DECISIONS else base


def _nothing_to_decide(ctx: RunContext, current: Node) -> str:
    """Why no evolution session is needed now ('' when one is): the DAG gained no node since the last evolution
    decided (it would see what it saw then, and its choice is the current node), or there is nothing but the
    current node to start from and no edge to transplant."""
    last = ctx.store.last_event(ctx.run_id, "evolution.action")
    newest = ctx.store.last_node_id(ctx.run_id)
    if last is not None and last.payload.get("last_node") == newest:
        return f"the DAG gained no node since iteration {last.payload.get('iteration')}'s evolution"
    if newest == current.id and current.parent_id is None:  # ids grow: the root is the only node
        return "the current node is the only node"
    return ""


def _answer(ctx: RunContext, it: Iteration, request: EvolutionRequest, current: Node) -> EvolutionResult:
    """A valid answer, asking again when the session failed or named what does not exist; else `continue`."""
    attempt = failures = invalid = 0
    reason = ""
    while True:
        asked = request.model_copy(update={"attempt": attempt, "retry_reason": reason})
        result = ctx.calls.evolve(asked, current.id)
        attempt += 1
        failed = failure_reason(result.stats)
        if failed:
            if failures < ctx.cfg.sessions.retries and worth_asking_again(result.stats):
                failures += 1
                reason = failed
                continue
            return _fallback(result, current, f"evolution failed ({failed})")
        error = evolution_request.answer_error(ctx.store, request, result)
        if not error:
            return result
        ctx.store.log_event(
            "evolution.invalid", {"iteration": it.number, "attempt": attempt - 1, "error": error}, run_id=ctx.run_id
        )
        if invalid < INVALID_ANSWER_RETRIES:
            invalid += 1
            reason = f"your answer was refused: {error}. Answer again with ids from the lists above"
            continue
        return _fallback(result, current, f"the answer was refused ({error})")


def _fallback(result: EvolutionResult, current: Node, why: str) -> EvolutionResult:
    return EvolutionResult(
        action="continue",
        parent_node_id=current.id,
        edge_ids=[],
        rationale=f"continue from the current node n{current.id}: {why}",
        stats=result.stats,
    )


def _judge(ctx: RunContext, it: Iteration, result: EvolutionResult, base: Node, nodes: list[Node]) -> Node:
    """Audit the chain's change against its base (`policies.audit`, as diagnosis' changes are: a refused cheat's
    edge must not come back by cherry-pick), then dev-evaluate the last node of the chain and give every node of it
    the verdict (once). A refused chain is invalid and costs no dev rollout."""
    node = nodes[-1]
    if node.status != "pending":
        return node
    suspect = audit.diff_suspect(ctx, base.commit, node.commit)
    if suspect:
        audit.record(ctx, it, node, "diff", suspect)
    if suspect and audit.refuses(ctx):
        reason = f"{result.action}: {suspect}"
        with ctx.store.transaction():
            for i, step in enumerate(nodes[:-1], 1):
                ctx.store.update_node(step.id, status=INVALID, status_reason=f"step {i} of {len(nodes)}: {reason}")
            return ctx.store.update_node(node.id, status=INVALID, status_reason=reason)
    if ctx.cfg.policies.dev_eval != "never":
        node = ctx.eval_dev(node)
    better = node.dev_mean is None or base.dev_mean is None or node.dev_mean >= base.dev_mean
    status = "accepted" if better else "rejected"
    reason = f"{result.action}: dev {figure(node.dev_mean)} vs base {figure(base.dev_mean)}"
    with ctx.store.transaction():
        for i, step in enumerate(nodes[:-1], 1):
            why = f"step {i} of {len(nodes)} of the {reason} (judged with n{node.id})"
            ctx.store.update_node(step.id, status=status, status_reason=why)
        node = ctx.store.update_node(node.id, status=status, status_reason=audit.marked(ctx, node, reason))
    ctx.update_best()
    return node
