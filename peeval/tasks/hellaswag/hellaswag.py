"""lm-eval's own HellaSwag preprocessing, so ``peeval_hellaswag`` builds the same requests as ``hellaswag``."""

from lm_eval.tasks.hellaswag.utils import process_docs

__all__ = ["process_docs"]
