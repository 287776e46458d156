"""What a run leaves in final/ travels: adapter (naming its base by hub id) and merged model each with the
tokenizer, the training prompt (in a file, and as the chat template's default where faithful), the save dtype,
a model card; and a hub id the hub cannot give stops with one line (exit 2) before any run directory exists."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.config import Config
from rlvr.policy.load import DEFAULT_MODEL, ModelUnavailable, base_model_id, cache_dir, resolve_model_path, save_policy
from rlvr.rundir.files import read_config
from rlvr.rundir.final import TEMPLATE_FILE, faithful_template, prompt_prefix
from rlvr.training.loop import train
from test_trainer import tiny_config

ROOT = Path(__file__).resolve().parent.parent
HUB_ID = "rlvr-test/tiny-llama"


def greedy_plain(folder: Path, questions: list[str], max_new_tokens: int) -> list[str]:
    """Greedy answers of a saved model as a user of plain transformers gets them: its own tokenizer and chat
    template, a bare user turn."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    out = []
    for q in questions:
        enc = tok.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        ids = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
        out.append(tok.decode(ids[0, enc["input_ids"].shape[1] :], skip_special_tokens=True))
    return out


def test_final_travels_and_merged_reproduces_the_runs_greedy_answers(tmp_path, tokenizer):
    from rlvr.evaluation.run_eval import EvalSettings, eval_config, evaluate_model

    cfg = tiny_config(
        tmp_path, **{"task.settings": "{path: %s, system_prompt: 'Answer in one word.'}" % (tmp_path / "data.jsonl")}
    )
    model = make_tiny_llama(len(tokenizer))
    run = train(cfg, policy=(model, tokenizer), quiet=True)  # peft puts the trained LoRA layers into `model`
    final = run / "final"
    for f in (
        "adapter/adapter_config.json",
        "adapter/adapter_model.safetensors",
        "adapter/tokenizer.json",
        "adapter/chat_template.jinja",
        "merged/model.safetensors",
        "merged/config.json",
        "merged/tokenizer.json",
        "merged/chat_template.jinja",
        TEMPLATE_FILE,
        "adapter/" + TEMPLATE_FILE,
        "merged/" + TEMPLATE_FILE,
        "README.md",
        "adapter/README.md",
        "merged/README.md",
    ):
        assert (final / f).is_file(), f
    record = json.loads((final / TEMPLATE_FILE).read_text())
    from rlvr.tasks import load_task

    # demo: auto, the jsonl default, as measured on the start model (test_demo_choice.py) and recorded in the run
    demo = load_task("jsonl", **read_config(run).task.settings).demo
    assert record["messages_before_question"] == [
        {"role": "system", "content": "Answer in one word."},
        *demo,
    ]
    assert record["chat_template"].startswith("puts") and record["answer_format"] == "boxed"
    card = (final / "README.md").read_text()
    assert "| steps | 2 |" in card and "first_char: regex x1.0" in card and "## Held-out evaluation" in card
    # the run's own evaluation of its final model (rlvr's loader, the task's prompts, its sampler in the reference
    # float32 path: a random tiny model's near-tied logits part ways under bf16) vs plain transformers
    records, _ = evaluate_model(
        str(run),
        None,
        EvalSettings(split="heldout", n=1, ks=[1], max_new_tokens=8, limit=4, progress=False),
        cfg=eval_config(str(run), ["rollout.dtype=float32"]),
    )
    greedy = {r.problem_id: r.completion for r in records if r.mode == "greedy"}
    problems = [p for p in load_task("jsonl", **read_config(run).task.settings).problems("heldout") if p.id in greedy]
    assert len(problems) == 4
    plain = greedy_plain(final / "merged", [p.prompt for p in problems], 8)
    assert plain == [greedy[p.id] for p in problems]
    # and below the text: the served prompt is the training prompt token for token, and the merged weights give
    # the trained policy's logits on it
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr.prompts.chat import encode_prompt

    tok, merged = (
        AutoTokenizer.from_pretrained(final / "merged"),
        AutoModelForCausalLM.from_pretrained(final / "merged"),
    )
    task = load_task("jsonl", **read_config(run).task.settings)  # as the run asked (its demo: auto, measured)
    for p in problems:
        trained_ids = encode_prompt(tokenizer, task.messages(p))
        served_ids = tok.apply_chat_template([{"role": "user", "content": p.prompt}], add_generation_prompt=True)
        served_ids = served_ids["input_ids"] if hasattr(served_ids, "keys") else served_ids
        assert served_ids == trained_ids
        assert encode_prompt(tokenizer, [{"role": "user", "content": p.prompt}]) != trained_ids  # the template matters
        x = torch.tensor([trained_ids])
        with torch.no_grad():
            assert torch.allclose(merged(x).logits, model.eval()(x).logits, atol=1e-4)


def test_chat_template_puts_the_one_shot_prompt_first_only_where_faithful(tokenizer):
    from rlvr.tasks import load_task

    task = load_task("arithmetic", per_band=20)  # system prompt + one solved exchange before each question
    problems = task.problems("train")[:3]
    prefix, why = prompt_prefix(task, problems)
    assert len(prefix) == 3 and prefix[0]["role"] == "system" and why == ""
    template, why_not = faithful_template(tokenizer, prefix, problems[0].prompt)
    assert template and why_not == ""
    for p in problems:  # a bare question renders exactly as the model was trained on it
        trained = tokenizer.apply_chat_template(task.messages(p), tokenize=False, add_generation_prompt=True)
        served = tokenizer.apply_chat_template(
            [{"role": "user", "content": p.prompt}], tokenize=False, add_generation_prompt=True, chat_template=template
        )
        assert served == trained
    own = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert tokenizer.apply_chat_template(own, tokenize=False, chat_template=template) == tokenizer.apply_chat_template(
        own, tokenize=False
    )  # a conversation with its own system turn: as before
    assert faithful_template(tokenizer, None, "q") == (None, "no single prompt prefix")


def test_an_episode_runs_record_shows_its_tools_as_the_policy_saw_them(tokenizer):
    import copy

    from rlvr.environments.build import build_tools
    from rlvr.environments.openings import EpisodeOpenings
    from rlvr.rundir.final import template_record
    from rlvr.tasks import load_task

    task = load_task("tool_arithmetic", per_band=10)
    problems = task.problems("train")[:3]
    tools = build_tools(Config().episode.__class__(environment="tool", tools=["calculator"]))
    record, template = template_record(EpisodeOpenings(task, tokenizer, tools=tools), tokenizer, problems)
    assert record["tools"] == [tools["calculator"].schema] and record["tools_shown"] == "in the system message"
    system = record["messages_before_question"][0]
    assert system["role"] == "system" and system["content"].endswith("</tools>")  # TOOLS_SYSTEM, appended
    served = tokenizer.apply_chat_template(
        [{"role": "user", "content": problems[0].prompt}],
        tokenize=False,
        add_generation_prompt=True,
        chat_template=template,
    )
    assert served == record["example"]["prompt_text"]  # a bare question is served with the tools, as trained
    # a chat template that renders `tools` itself: the record says to pass them, and the template is left alone
    own = copy.deepcopy(tokenizer)
    own.chat_template = "{% if tools %}TOOLS {{ tools | tojson }}\n{% endif %}" + tokenizer.chat_template
    record, template = template_record(EpisodeOpenings(task, own, tools=tools), own, problems)
    assert record["tools_shown"] == "by the chat template's `tools`" and template is None
    assert record["chat_template"].startswith("unchanged: the chat template renders the tools itself")
    assert record["example"]["prompt_text"].startswith("TOOLS [{")  # the example as the policy saw it: with tools
    assert record["example"]["messages"] == task.messages(problems[0])  # no tools block in the messages then


def test_save_dtype_and_base_model_ids(tmp_path, tokenizer, monkeypatch):
    from peft import LoraConfig, get_peft_model

    from rlvr.policy.load import embedded_folder

    model = make_tiny_llama(len(tokenizer))
    model.rlvr_base_model = HUB_ID
    peft_model = get_peft_model(model, LoraConfig(r=2, target_modules="all-linear"))
    save_policy(peft_model, tokenizer, tmp_path / "final", save_dtype="bfloat16")
    from safetensors import safe_open

    with safe_open(tmp_path / "final" / "merged" / "model.safetensors", "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}
    assert next(peft_model.parameters()).dtype == torch.float32  # the caller's model is untouched
    assert json.loads((tmp_path / "final/adapter/adapter_config.json").read_text())["base_model_name_or_path"] == HUB_ID
    assert (tmp_path / "final/adapter/tokenizer_config.json").exists()
    assert base_model_id(DEFAULT_MODEL) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    assert base_model_id(str(embedded_folder(DEFAULT_MODEL))) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert base_model_id("~/m.gguf") == str(gguf)  # a GGUF file: its absolute path, which rlvr loads again
    assert base_model_id("/x/hub/models--org--name/snapshots/abc123") == "org/name"
    assert base_model_id("org/name") == "org/name"


def fake_hub_cache(root: Path, repo_id: str, model, tokenizer) -> Path:
    """The hub cache layout huggingface_hub reads offline (refs/main -> snapshots/COMMIT/files): the hub's stand-in."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snap = repo / "snapshots" / commit
    model.save_pretrained(snap)
    tokenizer.save_pretrained(snap)
    return root


def test_the_card_names_the_saved_dtype_and_its_snippet_computes_where_it_is_fast(
    tmp_path, tokenizer, monkeypatch, capsys
):
    """Issue 64: the card's weights row said "saved in auto", and its snippet loaded final/merged as saved (bf16 for
    the embedded default): on a CPU without bf16 hardware, generation 6x slower than float32. The row names the dtype
    final/merged holds; the snippet, run as written from the run folder (CUDA hidden by conftest), computes in float32
    on such a CPU (or where it cannot tell) and in bf16 on one with AVX512-BF16 or AMX, rlvr's own `auto` rule."""
    import io

    from safetensors import safe_open

    from rlvr.config import as_config, resolve
    from rlvr.rundir.final import model_card

    base = tmp_path / "bf16-model"  # a base stored in bf16, as the embedded default's hub weights are
    make_tiny_llama(len(tokenizer)).to(torch.bfloat16).save_pretrained(base)
    tokenizer.save_pretrained(base)
    run = train(tiny_config(tmp_path, **{"model.name": str(base)}), quiet=True)
    with safe_open(run / "final" / "merged" / "model.safetensors", "pt") as f:
        assert f.get_tensor("model.norm.weight").dtype == torch.bfloat16
    card = (run / "final" / "README.md").read_text()
    assert (
        "| weights | trained in float32; final/merged saved in bfloat16 (model.save_dtype auto: the dtype the base "
        "model's weights are stored in) |"
    ) in card.splitlines()
    snippet = card.split("## Use\n\n```python\n")[1].split("```")[0]
    assert snippet.splitlines()[2:4] == [
        "# final/merged holds bfloat16 weights. Computed in bf16 where the hardware does it (a GPU, a CPU with "
        "AVX512-BF16 or AMX),",
        "# else in float32: torch emulates bf16 on other CPUs, several times slower",
    ]
    monkeypatch.chdir(run)  # the snippet's "final/merged"

    def cpuinfo(text):
        def fake_open(path, *a, **k):
            if path != "/proc/cpuinfo":
                return open(path, *a, **k)
            if text is None:
                raise FileNotFoundError(path)
            return io.StringIO(text)

        return fake_open

    for text, dtype in (
        ("flags\t: fpu sse2 avx2 fma\n", torch.float32),  # an AVX2-only EPYC
        ("flags\t: fpu avx2 avx512f avx512_bf16\n", torch.bfloat16),  # this project's 2-core machine
        (None, torch.float32),  # macOS, Windows
    ):
        capsys.readouterr()
        scope: dict = {"open": cpuinfo(text)}
        exec(snippet, scope)
        assert scope["device"] == "cpu" and scope["model"].dtype == dtype
        assert scope["out"].shape[1] > scope["inputs"]["input_ids"].shape[1] and capsys.readouterr().out.endswith("\n")
    # a dtype asked for by name is named as it is
    cfg = as_config(resolve(None, [f"output_dir={tmp_path / 'r'}", "model.save_dtype=float16"]))
    card = model_card(cfg, "org/name", None, 3, None, saved_dtype="float16")
    assert "| weights | trained in float32; final/merged saved in float16 |" in card.splitlines()


def test_hub_id_from_the_cache_names_the_adapters_base_and_peft_loads_it_there(tmp_path, tokenizer, monkeypatch):
    """A run on a hub id (served by the cache, hub offline) writes that id into the adapter; transformers + peft
    load final/adapter on it and give the merged model's logits."""
    cache = fake_hub_cache(tmp_path / "hub", HUB_ID, make_tiny_llama(len(tokenizer), seed=3), tokenizer)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_model_path(HUB_ID).startswith(str(cache))
    run = train(tiny_config(tmp_path / "t", **{"model.name": HUB_ID}), quiet=True)
    adapter = run / "final" / "adapter"
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == HUB_ID
    assert "base_model: rlvr-test/tiny-llama" in (run / "final" / "README.md").read_text()
    code = (
        "import sys, torch; from peft import AutoPeftModelForCausalLM; from transformers import AutoModelForCausalLM\n"
        "a = AutoPeftModelForCausalLM.from_pretrained(sys.argv[1]).eval(); m = AutoModelForCausalLM.from_pretrained(sys.argv[2]).eval()\n"
        "x = torch.tensor([[1, 5, 9, 200, 7]])\n"
        "with torch.no_grad(): d = (a(x).logits - m(x).logits).abs().max().item()\n"
        "print(a.peft_config['default'].base_model_name_or_path, d)"
    )
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(adapter), str(run / "final" / "merged")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    name, diff = out.stdout.split()
    assert name == HUB_ID and float(diff) < 1e-4
    # offline, on a machine whose hub cache lacks the base (as the embedded default's never has it): the card's own
    # code, with this run's paths, loads the adapter on the folder the run loaded its base from
    offline = (run / "final" / "README.md").read_text().split("## Load it without the hub\n")[1]
    offline = offline.split("## Held-out evaluation")[0]
    final = run.absolute() / "final"
    assert f'`AutoModelForCausalLM.from_pretrained("{final}/merged")` loads it with nothing else' in offline
    assert (
        f'`peft.AutoPeftModelForCausalLM.from_pretrained("{final}/adapter")` fetches that base from the hub' in offline
    )
    assert f'base = AutoModelForCausalLM.from_pretrained("{Path(resolve_model_path(HUB_ID)).absolute()}")' in offline
    script = (
        "import sys, torch\nfrom transformers import AutoModelForCausalLM\ntry:\n"
        "    from peft import AutoPeftModelForCausalLM; AutoPeftModelForCausalLM.from_pretrained(sys.argv[1]); print('hub')\n"
        "except Exception:\n    print('no-hub')\n"
        + offline.split("```python\n")[1].split("```")[0]
        + "m = AutoModelForCausalLM.from_pretrained(sys.argv[2]).eval(); x = torch.tensor([[1, 5, 9, 200, 7]])\n"
        "with torch.no_grad(): print((model.eval()(x).logits - m(x).logits).abs().max().item())\n"
    )
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "empty-hub"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", script, str(adapter), str(run / "final" / "merged")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    hub, diff = out.stdout.split()
    assert hub == "no-hub" and float(diff) < 1e-4  # AutoPeft cannot; the card's way gives the merged model's logits


def one_line_exit_2(capsys, argv) -> str:
    from rlvr.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_unknown_hub_id_offline_exits_2_with_one_line_and_no_run_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    err = one_line_exit_2(
        capsys, ["train", "--set", "model.name=HuggingFaceTB/SmolLM2-135M-Instruct", "--output-dir", str(out)]
    )
    for part in (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        str(tmp_path / "empty-cache"),
        "HF_HUB_OFFLINE",
        f"'{DEFAULT_MODEL}'",
        "rlvr train:",
    ):
        assert part in err, (part, err)
    assert not out.exists()
    err = one_line_exit_2(capsys, ["eval", "--model", "nobody/no-such-model", "--task", "arithmetic"])
    assert err.startswith("rlvr eval: model 'nobody/no-such-model'") and "HF_HUB_OFFLINE" in err
    err = one_line_exit_2(capsys, ["sft", "--set", "model.name=./no/such/folder", "--output-dir", str(out)])
    assert "no such folder" in err and not out.exists()
    with pytest.raises(ModelUnavailable):
        resolve_model_path("org/x")


def test_unreachable_hub_is_asked_once_and_leaves_nothing(tmp_path):
    """As a new user without network meets it: no HF_HUB_OFFLINE, a hub that refuses connections (127.0.0.1:9)."""
    out = tmp_path / "run"
    env = {
        **os.environ,
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_CACHE": str(tmp_path / "cache"),
        "PYTHONPATH": str(ROOT / "src"),
    }
    env.pop("HF_HUB_OFFLINE", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from rlvr.cli import main; sys.exit(main())",
            "train",
            "--set",
            "model.name=HuggingFaceTB/SmolLM2-135M-Instruct",
            "--output-dir",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "Warning" not in ln and "warn" not in ln]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "the hub cannot be reached" in lines[0] and "HF_HUB_OFFLINE" in lines[0] and DEFAULT_MODEL in lines[0]
    assert not out.exists()


def test_the_card_states_the_chat_templates_rule_and_the_template_keeps_it(tokenizer, tmp_path):
    """The bundled template adds the training turns (system prompt and demonstration) before a conversation that
    starts with a user turn and nothing before one that starts with a system turn; the card says exactly that."""
    from rlvr.config import as_config, resolve
    from rlvr.rundir.final import model_card, template_record, template_rule
    from rlvr.tasks import load_task

    task = load_task("arithmetic", per_band=20)
    record, template = template_record(task, tokenizer, task.problems("train")[:3])
    prefix = record["messages_before_question"]
    card = model_card(as_config(resolve(None, [f"output_dir={tmp_path / 'run'}"])), "org/name", None, 3, record)
    rule = template_rule(prefix)
    assert rule in card
    assert rule.startswith(
        "The chat template bundled in `adapter/` and `merged/` puts the 3 turns below (system, user, assistant, the "
        "training demonstration (1 solved exchange) among them) in front of every conversation whose first turn is "
        "not a system turn"
    )
    assert "starts with a system turn of its own gets none of them" in rule and "without the demonstration" in rule
    render = lambda chat: tokenizer.apply_chat_template(chat, tokenize=False, chat_template=template)  # noqa: E731
    question = {"role": "user", "content": "What is 2 + 2?"}
    bare, own = render([question]), render([{"role": "system", "content": "Be brief."}, question])
    assert prefix[0]["content"] in bare and prefix[2]["content"] in bare  # system prompt and demonstration
    assert prefix[0]["content"] not in own and prefix[2]["content"] not in own  # neither


def test_rlvr_eval_of_a_run_puts_its_heldout_table_into_every_card(tmp_path, tokenizer, capsys):
    import time

    from rlvr.cli import main
    from rlvr.evaluation.summary import summary_markdown

    run = train(tiny_config(tmp_path), policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    card = run / "final" / "README.md"
    assert f"Not evaluated yet; `rlvr eval --model {run.absolute()}` evaluates it" in card.read_text()
    argv = ["eval", "--model", str(run), "--n", "2", "--limit", "4", "--max-new-tokens", "8", "--quiet"]
    assert main(argv) == 0
    assert f"model card {card} (and its copies in adapter/ and merged/) now shows this evaluation" in (
        capsys.readouterr().out
    )
    summary = json.loads((run / "eval" / "heldout" / "summary.json").read_text())
    assert summary["overall"]["n_problems"] == 4
    day = time.strftime("%Y-%m-%d", time.gmtime())
    for path in (card, run / "final" / "adapter" / "README.md", run / "final" / "merged" / "README.md"):
        text = path.read_text()
        section = text.split("## Held-out evaluation\n")[1]
        assert "Not evaluated" not in text and text.count("## Held-out evaluation") == 1
        assert section.startswith(
            f"\nMeasured by `rlvr eval` on {day}: the `heldout` split of `jsonl` (4 problems), 2 samples per problem at "
            f"temperature 1.0 and a greedy decode, at most 8 new tokens; records in `{run / 'eval' / 'heldout'}`.\n\n"
        )
        table, measured = section.strip().rsplit("\n\n", 1)  # the table it just measured, then what it measured
        assert table.endswith(summary_markdown(summary).strip()) and measured.startswith("<!-- rlvr held-out measure:")
    # evaluated on other task settings, it is not the card's model on the card's task: the card stays
    before = card.read_text()
    other = ["--set", "task.settings.system_prompt=Be brief.", "--out", str(tmp_path / "other")]
    assert main(argv + other) == 0
    assert f"model card {card} left as it was: this evaluation changed the task settings" in capsys.readouterr().out
    assert card.read_text() == before


def test_a_quick_look_does_not_replace_the_cards_fuller_evaluation(tmp_path, tokenizer, capsys):
    """Issue 64: each `rlvr eval` of a run replaced its card's table, a greedy look at 2 problems included. The card
    keeps the fullest evaluation: one with fewer problems, fewer samples per problem or no greedy decode leaves it,
    saying why; one with at least as many replaces it; one written over the records the card cites (--overwrite)
    replaces it too, since the card follows its records."""
    from rlvr.cli import main
    from rlvr.rundir.final import heldout_measured

    run = train(tiny_config(tmp_path), policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    final, card = run / "final", run / "final" / "README.md"
    argv = ["eval", "--model", str(run), "--max-new-tokens", "4", "--quiet"]
    full = run / "eval" / "heldout"
    assert main([*argv, "--n", "2", "--limit", "4"]) == 0
    capsys.readouterr()
    assert heldout_measured(final) == {"problems": 4, "samples": 2, "greedy": True, "records": str(full.absolute())}
    shown = card.read_text()
    for look in (["--n", "0", "--limit", "2"], ["--n", "2", "--limit", "4", "--no-greedy"], ["--n", "1"]):
        assert main([*argv, *look, "--out", str(tmp_path / "look"), "--overwrite"]) == 0
        said = capsys.readouterr().out.splitlines()[-1]
        assert said.startswith(
            f"model card {card} left as it was: it shows a fuller evaluation (4 problems, 2 samples per problem and "
            f"the greedy decode; records in {full.absolute()}) than this one ("
        )
        assert card.read_text() == shown and (final / "merged" / "README.md").read_text() == shown
    assert said.endswith(  # all 6 held-out problems, but 1 sample each
        "than this one (6 problems, 1 sample per problem and the greedy decode); one with at least as many problems "
        "and samples per problem replaces it"
    )
    bigger = tmp_path / "bigger"
    assert main([*argv, "--n", "2", "--limit", "6", "--out", str(bigger)]) == 0
    assert f"model card {card} (and its copies in adapter/ and merged/) now shows this evaluation" in (
        capsys.readouterr().out
    )
    assert heldout_measured(final)["problems"] == 6 and f"records in `{bigger}`" in card.read_text()
    assert main([*argv, "--n", "0", "--limit", "2", "--out", str(bigger), "--overwrite"]) == 0  # its own records
    assert "now shows this evaluation" in capsys.readouterr().out
    assert heldout_measured(final) == {"problems": 2, "samples": 0, "greedy": True, "records": str(bigger)}


def test_the_main_job_adds_the_heldout_table_to_every_card(tmp_path):
    from rlvr.rundir.final import add_heldout, heldout_measured, write_model_card

    final = tmp_path / "final"
    for folder in ("adapter", "merged"):
        (final / folder).mkdir(parents=True)
    write_model_card(final, "# card\n\n## Held-out evaluation\n\nNot evaluated in this run.\n")
    measured = {"problems": 60, "samples": 4, "greedy": True, "records": str(tmp_path / "eval" / "rlvr")}
    add_heldout(final, "| band | pass@1 |\n|---|---|\n| all | 0.42 |\n", measured)
    for card in (final / "README.md", final / "adapter" / "README.md", final / "merged" / "README.md"):
        text = card.read_text()
        assert "| all | 0.42 |" in text and "Not evaluated" not in text
    assert heldout_measured(final) == measured  # what a later `rlvr eval` is weighed against


@pytest.mark.slow
def test_the_embedded_default_names_its_hub_id(tmp_path):
    from rlvr.policy.load import add_lora, load_policy, model_origin

    model, tok = load_policy(DEFAULT_MODEL)
    assert model.rlvr_base_model == "HuggingFaceTB/SmolLM2-135M-Instruct"
    base, loaded_from = model_origin(model, DEFAULT_MODEL)
    assert base == "HuggingFaceTB/SmolLM2-135M-Instruct" and str(cache_dir()) in loaded_from
    save_policy(add_lora(model, r=2), tok, tmp_path / "final", merged=False)
    cfg = json.loads((tmp_path / "final" / "adapter" / "adapter_config.json").read_text())
    assert cfg["base_model_name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
