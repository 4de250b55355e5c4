"""The package's layout: every public name where it was, and the house plan kept.

The lists below are the public names of funcgrad 0.1.0 and the release after it, frozen
here on purpose: a name that moves must stay importable where users found it.
"""

import importlib
import pkgutil
from pathlib import Path

import pytest

import funcgrad

TOP = [
    "Cut", "GradientSummary", "Op", "PyFuncError", "RegisterGradient", "SummaryWriter",
    "Unconnected", "UnconnectedGradients", "UnusedOverrideWarning", "clip_by_average_norm",
    "clip_by_global_norm", "clip_by_norm", "clip_by_value", "custom_gradient",
    "explain_unconnected", "format_unconnected", "global_norm", "gradient_override_map",
    "gradient_summary", "gradients", "hessians", "hvp", "identity", "nth_derivative",
    "py_func", "stop_gradient", "tap", "tap_gradients", "tensorflow_conventions", "testing",
    "train", "value_and_gradients", "write_gradient_summary",
]  # fmt: skip
TRAIN = [
    "AccumulateGradientsState", "AdadeltaOptimizer", "AdagradOptimizer", "AdamOptimizer",
    "Checkpointer", "EmaState", "ExponentialMovingAverage", "FtrlOptimizer",
    "GradientDescentOptimizer", "InjectLearningRateState", "LossScaleOptimizer",
    "LossScaleState", "MomentumOptimizer", "Optimizer", "OptimizerGroup",
    "ProximalAdagradOptimizer", "ProximalGradientDescentOptimizer", "RMSPropOptimizer",
    "ScaleByTfAdamState", "SkippedSteps", "TfFtrlState", "TfProximalAdagradState",
    "TrainState", "accumulate_gradients", "cosine_decay", "cosine_decay_restarts",
    "data_parallel", "exponential_decay", "inverse_time_decay", "linear_cosine_decay",
    "minimize_in_microbatches", "natural_exp_decay", "noisy_linear_cosine_decay",
    "piecewise_constant", "polynomial_decay", "restore_tf_checkpoint", "save_tf_checkpoint",
    "scale_by_learning_rate", "scale_by_tf_adam", "set_learning_rate", "shard_map_minimize",
    "skip_nonfinite", "skipped_steps", "tf_ftrl", "tf_proximal_adagrad",
    "tf_proximal_gradient_descent", "variable_names",
]  # fmt: skip
TESTING = ["check_gradients", "compute_gradient"]

PACKAGE = Path(funcgrad.__file__).parent
SUBPACKAGES = ["funcgrad.train.optimizers", "funcgrad.train.schedules",
               "funcgrad.train.wrappers", "funcgrad.train.checkpoints"]  # fmt: skip


@pytest.mark.parametrize(
    ("module", "names"),
    [("funcgrad", TOP), ("funcgrad.train", TRAIN), ("funcgrad.testing", TESTING)],
)
def test_every_public_name_is_importable_where_it_was(module, names):
    mod = importlib.import_module(module)
    missing = [name for name in names if not hasattr(mod, name)]
    assert not missing, f"{module} lost {missing}"
    unlisted = [name for name in names if name not in mod.__all__]
    assert not unlisted, f"{module}.__all__ lost {unlisted}"


def test_fg_train_names_are_the_same_objects_as_in_their_subpackages():
    for package in SUBPACKAGES:
        sub = importlib.import_module(package)
        for name in sub.__all__:
            assert getattr(funcgrad.train, name) is getattr(sub, name), (package, name)
            assert name in funcgrad.train.__all__, (package, name)


def test_each_subpackage_opens_with_a_docstring_naming_its_modules():
    for package in [*SUBPACKAGES, "funcgrad._core"]:
        sub = importlib.import_module(package)
        doc = sub.__doc__ or ""
        assert doc.strip(), package
        modules = [m.name for m in pkgutil.iter_modules(sub.__path__)]
        if package != "funcgrad._core":  # _core's map is its README
            unnamed = [m for m in modules if f"``{m}``" not in doc]
            assert not unnamed, f"{package}'s docstring does not name {unnamed}"


def test_the_house_plan():
    train = [p.stem for p in (PACKAGE / "train").glob("*.py") if p.stem != "__init__"]
    assert len(train) <= 12, sorted(train)
    private_top = [p.stem for p in PACKAGE.glob("_*.py") if p.stem != "__init__"]
    assert len(private_top) <= 4, sorted(private_top)
    readme = (PACKAGE / "_core" / "README.md").read_text()
    for module in pkgutil.iter_modules([str(PACKAGE / "_core")]):
        assert f"`{module.name}.py`" in readme, f"_core/README.md does not explain {module.name}"


TESTS = Path(__file__).parent


def _public_modules() -> list[Path]:
    """Each public module's path under ``funcgrad/`` (no part of it private)."""
    return sorted(
        p.relative_to(PACKAGE)
        for p in PACKAGE.rglob("*.py")
        if not any(part.startswith("_") for part in p.relative_to(PACKAGE).parts)
    )


def _test_file(module: Path) -> Path:
    """``tests/<the module's folder>/test_<module>.py``."""
    return module.parent / f"test_{module.name}"


def test_every_public_module_has_its_test_file() -> None:
    missing = [
        f"funcgrad/{m} -> tests/{_test_file(m)}"
        for m in _public_modules()
        if not (TESTS / _test_file(m)).is_file()
    ]
    assert not missing, f"write these test files: {missing}"


def test_the_readme_maps_every_public_module_to_its_test_file() -> None:
    readme = (TESTS / "README.md").read_text()
    rows = [f"| `funcgrad/{m}` | `tests/{_test_file(m)}` |" for m in _public_modules()]
    absent = [row for row in rows if row not in readme]
    assert not absent, f"tests/README.md's module table lacks {absent}"
