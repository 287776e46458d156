"""The environment pieces that stand alone: a tool's schema from its signature and docstring, tool calls parsed and
run (every failure text for the model, with a status), the exact calculator, and the python tool in the sandbox,
replayed against the code verifier's hostile suite: nothing escapes, nothing is left running."""

import json

import pytest

from rlvr.config import RewardConfig
from rlvr.environments.builtin import calculator, python_tool
from rlvr.environments.calls import TOOL_CALL_PARSERS, ToolCall, parse_hermes, run_call
from rlvr.environments.tools import tool_from_function
from rlvr.errors import ConfigError


def lookup(city: str, days: int = 1, units: list[str] | None = None) -> str:
    """Weather for a city.

    Spread over two lines of description.

    Args:
        city: the city's name.
        days (int): how many days ahead,
            counted from today.
        units: the units to report.

    Returns:
        the forecast as text.
    """
    return f"{city}: sunny for {days} days"


def test_a_tools_schema_comes_from_its_signature_and_docstring():
    tool = tool_from_function(lookup)
    assert tool.schema == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Weather for a city. Spread over two lines of description.",
            "parameters": {
                "type": "object",
                "required": ["city"],
                "properties": {
                    "city": {"type": "string", "description": "the city's name."},
                    "days": {"type": "integer", "description": "how many days ahead, counted from today."},
                    "units": {"type": "array", "items": {"type": "string"}, "description": "the units to report."},
                },
            },
        },
    }


def no_doc(x: int) -> int:
    return x


def undocumented_arg(x: int, y: int) -> int:
    """Adds.

    Args:
        x: the first.
    """
    return x + y


def untyped(x) -> int:
    """Nothing.

    Args:
        x: a value.
    """
    return x


@pytest.mark.parametrize(
    "fn, message",
    [
        (no_doc, "tool 'no_doc': no docstring"),
        (undocumented_arg, "tool 'undocumented_arg': argument 'y' has no line in the docstring's Args: section"),
        (untyped, "tool 'untyped': argument 'x' has no type annotation"),
    ],
)
def test_a_tool_that_cannot_be_described_is_refused_by_name(fn, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tool_from_function(fn)


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            '<tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool_call>',
            [("calculator", {"expression": "2+3"}, None)],
        ),
        (
            'a <tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call> b <tool_call>{"name": "b"}</tool_call>',
            [("a", {"x": 1}, None), ("b", {}, None)],
        ),
        (
            "<tool_call>{name: calculator}</tool_call>",
            [(None, {}, "not JSON (Expecting property name enclosed in double quotes at character 1)")],
        ),
        ('<tool_call>["calculator"]</tool_call>', [(None, {}, 'expected {"name": "...", "arguments": {...}}')]),
        (
            '<tool_call>{"name": "calculator", "arguments": 5}</tool_call>',
            [("calculator", {}, "arguments must be a JSON object")],
        ),
        ('<tool_call>{"name": "calculator"', [(None, {}, "<tool_call> without </tool_call>")]),
        ("no call here", []),
    ],
)
def test_hermes_tool_calls_are_parsed_or_say_why_not(text, expected):
    assert [(c.name, c.arguments, c.error) for c in parse_hermes(text)] == expected
    assert TOOL_CALL_PARSERS.get("hermes") is parse_hermes


def test_every_failure_of_a_call_is_text_with_a_status():
    tools = {"calculator": tool_from_function(calculator)}
    ok = run_call(ToolCall("calculator", {"expression": "1234 * 5678"}), tools)
    assert (ok.text, ok.status) == ("7006652", "ok")
    assert run_call(ToolCall(None, error="not JSON"), tools).status == "parse_error"
    unknown = run_call(ToolCall("search", {}), tools)
    assert (unknown.status, unknown.text) == ("unknown_tool", "Error: unknown tool 'search'; tools: calculator.")
    assert run_call(ToolCall("calculator", {"expr": "1"}), tools).status == "bad_arguments"
    failed = run_call(ToolCall("calculator", {"expression": "1/0"}), tools)
    assert (failed.status, failed.text) == ("tool_error", "Error: ZeroDivisionError: division by zero")


@pytest.mark.parametrize(
    "expression, value",
    [
        ("123456 * 789012", "97408265472"),
        ("(7 + 5) * 3 - 4 ** 2", "20"),
        ("10 / 4", "5/2 (= 2.5)"),
        ("2^10", "1024"),
        ("-3 // 2", "-2"),
        ("17 % 5", "2"),
        ("0.1 + 0.2", "3/10 (= 0.3)"),
    ],
)
def test_the_calculator_is_exact(expression, value):
    assert calculator(expression) == value


@pytest.mark.parametrize(
    "expression, error",
    [
        ("__import__('os').system('id')", "only numbers"),
        ("10 ** 10 ** 9", "exponents must be whole numbers up to 64"),
        ("9" * 300, "past 200 digits"),
        ("2 ** 0.5", "exponents must be whole numbers"),
        ("x + 1", "only numbers"),
    ],
)
def test_the_calculator_runs_no_code_and_bounds_its_work(expression, error):
    with pytest.raises(ValueError, match=error):
        calculator(expression)


def test_the_python_tool_runs_code_in_the_sandbox():
    tool = python_tool(wall_s=3)
    assert tool.fn(code="print(sum(range(101)))") == "5050"
    assert "ZeroDivisionError" in tool.fn(code="print(1/0)")
    assert tool.fn(code="import time\ntime.sleep(60)").endswith("[stopped: over 3 s]")
    assert json.dumps(tool.schema["function"]["parameters"]["required"]) == '["code"]'


def test_the_hostile_code_suite_as_python_tool_calls_in_episodes_escapes_nothing(tokenizer):
    """Each attack as the policy's turn of an episode (a python tool call): the tool environment runs it in the
    sandbox, its output is spliced in as the environment's ids, and nothing escapes or is left running."""
    from rlvr.environments.episode import answer_turn, record_turn, start_episode
    from rlvr.environments.tool_env import ToolEnvironment
    from rlvr.tasks.base import Problem
    from rlvr.verifiers.code_attacks import host_damage, hostile_suite
    from rlvr.verifiers.compose import build_reward
    from rlvr.verifiers.sandbox import sandbox_processes

    reward = build_reward(RewardConfig(terms=[{"kind": "math", "answer_form": "number"}], workers=0))
    attacks, listener = hostile_suite()
    try:
        for attack in attacks:
            code = attack.completion.removeprefix("```python\n").removesuffix("```")
            entry = attack.problem.meta["entry_point"]
            code += (
                f"\nprint({entry}(3) if '{entry}' in globals() and '{entry}' != 'steal' else {entry}())\n"
                if entry in code
                else ""
            )
            env = ToolEnvironment(
                lambda p: [{"role": "user", "content": p.prompt}], reward, {"python": python_tool(wall_s=2)}
            )
            ep, extra = start_episode(env, Problem("h", "Run it.", answer="1"), tokenizer)
            turn = "<tool_call>" + json.dumps({"name": "python", "arguments": {"code": code}}) + "</tool_call>"
            ids = tokenizer(turn, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            record_turn(ep, ids, [0.0] * len(ids), turn)
            assert answer_turn(ep, env, tokenizer, extra, turn, True, tokenizer.eos_token), attack.name
            assert ep.status == "ok" and sum(ep.tool_calls.values()) == 1, attack.name
            spliced = tokenizer.decode([t for t, m in zip(ep.ids, ep.mask) if m == 0])
            assert "rlvr-secret-4e7bd1" not in spliced and "tool" in spliced, attack.name
            assert host_damage(attack, listener) == [], attack.name
    finally:
        listener.close()
    assert sandbox_processes() == []


def test_the_tool_environment_answers_calls_then_grades_the_final_answer():
    from rlvr.environments.builtin import calculator
    from rlvr.environments.tool_env import ToolEnvironment
    from rlvr.tasks.base import Problem
    from rlvr.verifiers.compose import build_reward

    reward = build_reward(RewardConfig(terms=[{"kind": "math", "answer_form": "number"}], workers=0))
    env = ToolEnvironment(
        lambda p: [{"role": "user", "content": p.prompt}], reward, {"calculator": tool_from_function(calculator)}
    )
    problem = Problem("m1", "What is 1234 * 5678?", answer="7006652")
    assert env.reset(problem) == [{"role": "user", "content": "What is 1234 * 5678?"}]
    step = env.step(
        '<tool_call>{"name": "calculator", "arguments": {"expression": "1234 * 5678"}}</tool_call>'
        '<tool_call>{"name": "calc"}</tool_call><tool_call>oops</tool_call>'
    )
    assert [m["content"] for m in step.messages][0] == "7006652" and not step.done
    assert step.tool_statuses == ["ok", "unknown_tool", "parse_error"]
    final = env.step("The product is \\boxed{7006652}.")
    assert final.done and final.reward_parts == {"answer": 1.0} and final.verdict.status == "correct"
    assert env.step("\\boxed{1234*5678}").reward_parts == {"answer": 0.0}  # the number form: no expressions


def test_a_round_of_tool_steps_grades_its_answers_in_one_reward_call_and_runs_its_calls_alone():
    """ToolEnvironment.step_batch through take_steps: the answers of a round (right, wrong, unboxed) graded by one
    reward call, the turns that call tools stepped alone as before; the same Steps as `step` one by one."""
    from rlvr.environments.builtin import calculator
    from rlvr.environments.stepping import take_steps
    from rlvr.environments.tool_env import ToolEnvironment
    from rlvr.tasks.base import Problem
    from rlvr.verifiers.compose import build_reward

    real = build_reward(RewardConfig(terms=[{"kind": "math", "answer_form": "number"}], workers=0))
    calls: list[int] = []

    def reward(texts, problems):
        calls.append(len(texts))
        return real(texts, problems)

    tools = {"calculator": tool_from_function(calculator)}
    problems = [Problem(f"m{i}", f"What is {i} * 7?", answer=str(i * 7)) for i in range(5)]
    turns = [
        "\\boxed{0}",
        "\\boxed{8}",
        '<tool_call>{"name": "calculator", "arguments": {"expression": "2 * 7"}}</tool_call>',
        "no box at all",
        "It is \\boxed{28}.",
    ]

    def play(take_round):
        envs = [ToolEnvironment(lambda p: [{"role": "user", "content": p.prompt}], reward, tools) for _ in problems]
        for env, p in zip(envs, problems):
            env.reset(p)
        steps = take_round(envs, turns)
        return [(s.done, s.messages, s.reward_parts, s.tool_statuses, s.verdict and s.verdict.status) for s in steps]

    one_by_one = play(lambda envs, ts: [env.step(t) for env, t in zip(envs, ts)])
    assert calls == [1, 1, 1, 1]  # an answer a call; the tool turn calls no reward
    calls.clear()
    batched = play(lambda envs, ts: [step for step, _seconds in take_steps(envs, ts, 30.0, workers=4)])
    assert calls == [4]  # the round's four answers in one call
    assert batched == one_by_one
    assert [b[4] for b in batched] == ["correct", "wrong", None, "no_answer", "correct"]
    assert [b[2] for b in batched] == [{"answer": 1.0}, {"answer": 0.0}, {}, {"answer": 0.0}, {"answer": 1.0}]
    assert batched[2][1] == [{"role": "tool", "content": "14"}] and batched[2][3] == ["ok"] and not batched[2][0]
