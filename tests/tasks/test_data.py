"""peeval.data: only a genuine not-found or offline error becomes "neither in the mirror nor on the
hub"; every other failure of ``datasets.load_dataset`` / lm-eval's download keeps its own message."""

import datasets
import pytest
from huggingface_hub.errors import OfflineModeIsEnabled

from peeval import data


@pytest.fixture
def no_mirror(tmp_path, monkeypatch):
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "empty"))


def test_offline_unknown_dataset_is_the_not_found_error(no_mirror, hub_offline):
    """The real library, offline: datasets raises ConnectionError; peeval names dataset and mirror."""
    with pytest.raises(FileNotFoundError, match=r"dataset 'nosuch-org/nosuch-ds' \(cfg\) is neither in the mirror"):
        data.load_dataset("nosuch-org/nosuch-ds", "cfg", split="test")


@pytest.mark.parametrize(
    "error",
    [
        datasets.exceptions.DatasetNotFoundError("Dataset 'x/y' doesn't exist on the Hub"),
        ConnectionError("Couldn't reach 'x/y' on the Hub (LocalEntryNotFoundError)"),
        OfflineModeIsEnabled("offline"),
        RuntimeError("wrapped"),  # raised *from* a not-found error below
    ],
)
def test_not_found_and_offline_errors_are_named(no_mirror, monkeypatch, error):
    def fail(*a, **k):
        if isinstance(error, RuntimeError):
            raise error from FileNotFoundError("x/y/data/test.parquet")
        raise error

    monkeypatch.setattr(datasets, "load_dataset", fail)
    with pytest.raises(FileNotFoundError, match="'x/y' is neither in the mirror") as e:
        data.load_dataset("x/y", split="test")
    assert e.value.__cause__ is error


@pytest.mark.parametrize(
    "error",
    [
        ValueError("Unknown split \"tset\". Should be one of ['test']."),
        ValueError("BuilderConfig 'qasperr' not found. Available: ['qasper', 'qmsum']"),
        TypeError("load_dataset() got an unexpected keyword argument 'streming'"),
        datasets.exceptions.DatasetGenerationError("An error occurred while generating the dataset"),
        MemoryError(),
    ],
)
def test_other_errors_propagate_with_their_own_message(no_mirror, monkeypatch, error):
    """Before: every one of these read 'neither in the mirror nor reachable on the hub'."""

    def fail(*a, **k):
        raise error

    monkeypatch.setattr(datasets, "load_dataset", fail)
    with pytest.raises(type(error)) as e:
        data.load_dataset("x/y", split="test")
    assert e.value is error


class _Config:
    custom_dataset = None


def _fake_task_module(error):
    class ConfigurableTask:
        DATASET_PATH = "x/y"
        DATASET_NAME = None
        config = _Config()

        def download(self, dataset_kwargs=None, **kwargs):
            raise error

    return type("M", (), {"ConfigurableTask": ConfigurableTask})


def test_lm_eval_download_keeps_other_errors_and_names_missing_datasets(no_mirror):
    bad_split = ValueError('Unknown split "tset"')
    mod = _fake_task_module(bad_split)
    data.patch_lm_eval_tasks(mod)
    with pytest.raises(ValueError) as e:
        mod.ConfigurableTask().download()
    assert e.value is bad_split
    mod = _fake_task_module(ConnectionError("Couldn't reach 'x/y' on the Hub (OfflineModeIsEnabled)"))
    data.patch_lm_eval_tasks(mod)
    with pytest.raises(FileNotFoundError, match="'x/y' is neither in the mirror"):
        mod.ConfigurableTask().download()


def _task_module(task_name: str, offline: bool = False):
    """A stand-in for lm-eval's task module whose ``download`` records each dataset path it reads; ``offline``:
    as lm-eval behaves without a network, a hub id is unreachable and only a folder loads."""

    class _Named:
        custom_dataset = None
        task = task_name

    class ConfigurableTask:
        DATASET_PATH = "x/y"
        DATASET_NAME = None
        config = _Named()
        read = []

        def download(self, dataset_kwargs=None, **kwargs):
            self.read.append(self.DATASET_PATH)
            if offline and not self.DATASET_PATH.startswith("/"):
                raise ConnectionError(f"Couldn't reach '{self.DATASET_PATH}' on the Hub (OfflineModeIsEnabled)")

    return type("M", (), {"ConfigurableTask": ConfigurableTask})


@pytest.mark.parametrize("configured", [False, True])
def test_lm_eval_own_tasks_read_a_mirror_only_when_configured(configured, tmp_path, monkeypatch):
    """Issue 32: a ``shared/data`` folder that happens to sit beside the working directory is no reason to
    change what lm-eval's own tasks read; peeval's own tasks use it, and everything does once it is named."""
    (tmp_path / "shared" / "data" / "hf" / "x" / "y").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "shared")  # the default guess: ../shared/data beside the working directory
    monkeypatch.setattr(data, "__file__", str(tmp_path / "site-packages" / "peeval" / "data" / "__init__.py"))
    if configured:
        monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "shared" / "data"))
    else:
        monkeypatch.delenv("PEEVAL_DATA_MIRROR", raising=False)
    assert data.mirror_root() == tmp_path / "shared" / "data"
    mirrored = str(tmp_path / "shared" / "data" / "hf" / "x" / "y")
    for name, routed in (("arc_easy", configured), ("peeval_ppl_pg19", True)):
        mod = _task_module(name)
        data.patch_lm_eval_tasks(mod)
        mod.ConfigurableTask().download()
        assert mod.ConfigurableTask.read == [mirrored if routed else "x/y"], name


def _nearby_mirror(tmp_path, monkeypatch, with_dataset: bool = True):
    (tmp_path / "shared" / "data" / "hf").mkdir(parents=True)
    if with_dataset:
        (tmp_path / "shared" / "data" / "hf" / "x" / "y").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "shared")
    monkeypatch.setattr(data, "__file__", str(tmp_path / "site-packages" / "peeval" / "data" / "__init__.py"))
    monkeypatch.delenv("PEEVAL_DATA_MIRROR", raising=False)
    return tmp_path / "shared" / "data"


def test_lm_eval_own_tasks_fall_back_to_a_nearby_mirror_when_the_hub_does_not_answer(tmp_path, monkeypatch):
    """Issue 45: offline, `lm_eval --tasks arc_easy` ended in ConnectionError with the mirror beside the
    repository; now the hub is tried first (issue 32: a nearby folder changes nothing while the hub answers),
    then the mirror, and the read is recorded as the mirror's."""
    root = _nearby_mirror(tmp_path, monkeypatch)
    mod = _task_module("arc_easy", offline=True)
    data.patch_lm_eval_tasks(mod)
    with data.recording() as reads:
        mod.ConfigurableTask().download()
    assert mod.ConfigurableTask.read == ["x/y", str(root / "hf" / "x" / "y")]
    assert mod.ConfigurableTask.DATASET_PATH == "x/y"  # the task's own attribute is left as it was
    assert [(r["source"], r["location"]) for r in reads["arc_easy"]] == [("mirror", "hf/x/y")]


def test_a_dataset_in_neither_place_is_one_line_naming_the_env_var_and_peeval_data(tmp_path, monkeypatch):
    _nearby_mirror(tmp_path, monkeypatch, with_dataset=False)
    mod = _task_module("arc_easy", offline=True)
    data.patch_lm_eval_tasks(mod)
    with pytest.raises(FileNotFoundError) as e:
        mod.ConfigurableTask().download()
    msg = str(e.value)
    assert "\n" not in msg and "'x/y'" in msg and "PEEVAL_DATA_MIRROR" in msg and "`peeval data`" in msg
    assert mod.ConfigurableTask.read == ["x/y"]


def test_lm_eval_arc_easy_offline_reads_the_mirror_beside_the_repository(hub_offline, monkeypatch, tmp_path):
    """The real task and library, offline, PEEVAL_DATA_MIRROR unset: lm-eval's own arc_easy loads."""
    monkeypatch.delenv("PEEVAL_DATA_MIRROR", raising=False)
    if data.mirror_path("allenai/ai2_arc", "ARC-Easy") is None:
        pytest.skip("no ai2_arc in a mirror beside the repository")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "empty-cache")  # not served from a cache
    from lm_eval.tasks import TaskManager, get_task_dict

    data.patch_lm_eval_tasks()
    with data.recording() as reads:
        tasks = get_task_dict(["arc_easy"], TaskManager())
    assert len(tasks["arc_easy"].dataset["test"]) > 0
    assert [(r["source"], r["location"]) for r in reads["arc_easy"]] == [("mirror", "hf/allenai/ai2_arc")]
