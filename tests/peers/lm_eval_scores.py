"""Peer oracle: score a local task with lm-evaluation-harness's HFLM; print per-example results as JSON.

usage: python lm_eval_scores.py MODEL_DIR TASK_DIR TASK[,TASK...] [LIMIT]
Runs offline (HF_HUB_OFFLINE, HF_DATASETS_OFFLINE); the task is a YAML in TASK_DIR reading local files.
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main(model_dir: str, task_dir: str, tasks: str, limit: str = "0") -> None:
    import torch

    torch.set_num_threads(1)
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    lm = HFLM(pretrained=model_dir, dtype="float32", batch_size=8, device="cpu")
    names = tasks.split(",")
    out = simple_evaluate(model=lm, tasks=names, task_manager=TaskManager(include_path=task_dir),
                          log_samples=True, limit=int(limit) or None, num_fewshot=0)
    res = {}
    for task in names:
        samples = sorted(out["samples"][task], key=lambda s: s["doc_id"])
        res[task] = {"metrics": out["results"][task],
                     "examples": [{"i": s["doc_id"], "lls": [float(r[0]) for r in s["filtered_resps"]],
                                   "acc": s.get("acc"), "acc_norm": s.get("acc_norm")} for s in samples]}
    print(json.dumps(res))


if __name__ == "__main__":
    main(*sys.argv[1:])
