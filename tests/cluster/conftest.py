from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .zk import Ensemble


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    ens = Ensemble(tmp_path_factory.mktemp("zk"), 1).start()
    yield ens
    ens.stop()


@pytest.fixture
def zk_ensemble3(tmp_path: Path) -> Iterator[Ensemble]:
    ens = Ensemble(tmp_path, 3).start()
    yield ens
    ens.stop()
