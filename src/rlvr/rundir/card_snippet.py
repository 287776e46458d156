"""The model card's snippet: load final/merged in the dtype the hardware computes fast, prompt it as the run was
prompted (the chat template, or the plain text of a base model: rlvr.prompts.chat), generate and print."""

from __future__ import annotations

from rlvr.machine import BF16_FLAGS


def use_lines(generate: list[str], saved_dtype: str | None) -> list[str]:
    """The card's snippet: final/merged in bf16 where the hardware computes it (a GPU; a CPU with rlvr.machine's flags),
    else float32 (transformers alone loads them as saved: bf16, emulated on other CPUs, is several times slower);
    `generate`: the lines that build the prompt (in the run's prompt format) and generate `out` from `inputs`."""
    flags = "{" + ", ".join(f'"{f}"' for f in sorted(BF16_FLAGS)) + "}"
    return [
        "## Use",
        "",
        "```python",
        "import torch",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        f"# {'final/merged holds ' + saved_dtype + ' weights. ' if saved_dtype else ''}Computed in bf16 where the "
        "hardware does it (a GPU, a CPU with AVX512-BF16 or AMX),",
        "# else in float32: torch emulates bf16 on other CPUs, several times slower",
        "try:",
        f'    cpu_bf16 = bool({flags} & set(open("/proc/cpuinfo").read().split()))',
        "except OSError:  # no /proc/cpuinfo (not Linux): float32",
        "    cpu_bf16 = False",
        'device = "cuda" if torch.cuda.is_available() else "cpu"',
        'dtype = torch.bfloat16 if device == "cuda" or cpu_bf16 else torch.float32',
        'tok = AutoTokenizer.from_pretrained("final/merged")',
        'model = AutoModelForCausalLM.from_pretrained("final/merged", dtype=dtype).to(device)',
        *generate,
        'print(tok.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))',
        "```",
        "",
    ]


def plain_use_lines(record: dict, question: str) -> list[str]:
    """The card snippet's lines that build the prompt and generate, the plain format's (`question`: a Python literal;
    `tok`, `model` and `device` are the snippet's)."""
    plain = record.get("plain") or {}
    before, after = plain.get("text_before_question", ""), plain.get("text_after_question", "")
    return [
        f"question = {question}",
        f"prompt = {before!r} + question + {after!r}  # the plain training prompt (prompt_template.json)",
        'inputs = tok(prompt, return_tensors="pt")',
        f"stop = {plain.get('stop_ids')}  # end of text, or a next User: line, as in training",
        "out = model.generate(**inputs.to(device), max_new_tokens=96, do_sample=False, eos_token_id=stop)",
    ]


__all__ = ["plain_use_lines", "use_lines"]
