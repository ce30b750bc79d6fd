"""lm-eval's own HellaSwag preprocessing, so ``peeval_hellaswag`` builds the same requests as ``hellaswag``;
the task class only refuses metadata keys it does not read (peeval.tasks.metadata_keys)."""

from lm_eval.api.task import ConfigurableTask
from lm_eval.tasks.hellaswag.utils import process_docs

from peeval.tasks.metadata_keys import check_keys

__all__ = ["HellaswagTask", "process_docs"]


class HellaswagTask(ConfigurableTask):
    def __init__(self, config=None, **kwargs):  # the YAML's ``class`` key is not a TaskConfig field
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        check_keys(config.get("task", "peeval_hellaswag"), config.get("metadata") or {})
        super().__init__(config=config, **kwargs)
