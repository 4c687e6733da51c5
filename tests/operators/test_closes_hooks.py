"""Every Tablestore task that caches hooks says in its own ``execute`` that it closes them (``@closes_hooks``):
nothing wraps a user-visible method behind the class's back."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import airflow_tablestore.operators
import airflow_tablestore.sensors
from airflow_tablestore.operators.base import TablestoreHookMixin


def _task_classes() -> list[type]:
    classes = []
    for package in (airflow_tablestore.operators, airflow_tablestore.sensors):
        for module_info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{module_info.name}")
            classes += [value for value in vars(module).values()
                        if inspect.isclass(value) and issubclass(value, TablestoreHookMixin)
                        and value.__module__ == module.__name__]
    return classes


def test_every_execute_of_a_hook_caching_task_is_decorated() -> None:
    classes = _task_classes()
    assert len(classes) >= 10  # the operators and sensors of the package were found
    undecorated = [cls.__name__ for cls in classes
                   if "execute" in vars(cls) and not getattr(vars(cls)["execute"], "closes_hooks", False)]
    assert undecorated == []


def test_the_mixin_no_longer_rewrites_subclasses() -> None:
    class Plain(TablestoreHookMixin[object]):  # type: ignore[type-var]
        def execute(self) -> str:
            return "ran"

    assert not getattr(Plain.execute, "closes_hooks", False)
    assert "__init_subclass__" not in vars(TablestoreHookMixin)
