from odradek.controller import reassignment as ra


def test_start_puts_targets_first_and_remembers_the_original() -> None:
    r, replicas = ra.start([1, 2], None, [3, 2])
    assert replicas == [3, 2, 1]
    assert r.original == (1, 2) and r.target == (3, 2)
    assert r.adding == [3] and r.removing == [1]


def test_a_second_target_keeps_the_first_original() -> None:
    r1, replicas = ra.start([1, 2], None, [3, 2])
    r2, replicas2 = ra.start(replicas, r1, [4, 2])
    assert r2.original == (1, 2) and replicas2 == [4, 2, 3, 1]
    assert r2.adding == [4] and r2.removing == [1]


def test_completion_waits_for_every_target_in_the_isr() -> None:
    r, replicas = ra.start([1, 2], None, [3, 2])
    assert ra.completion(r, replicas, leader=1, isr=[1, 2], live={1, 2, 3}) is None
    done = ra.completion(r, replicas, leader=1, isr=[1, 2, 3], live={1, 2, 3})
    assert done is not None
    assert done.leader == 3 and done.isr == [2, 3] and done.remove == [1]


def test_completion_keeps_a_leader_that_stays() -> None:
    r, replicas = ra.start([1, 2], None, [1, 3])
    done = ra.completion(r, replicas, leader=1, isr=[1, 2, 3], live={1, 2, 3})
    assert done is not None and done.leader == 1 and done.isr == [1, 3] and done.remove == [2]


def test_validate_and_resume_from_the_topic_document() -> None:
    assert ra.validate_target([], {1}) is not None
    assert ra.validate_target([1, 1], {1}) is not None
    assert ra.validate_target([1, 9], {1, 2}) is not None
    assert ra.validate_target([2, 1], {1, 2}) is None
    r = ra.from_topic_doc([3, 2, 1], [3], [1])
    assert r is not None and r.original == (2, 1) and r.target == (3, 2)
    assert ra.from_topic_doc([1, 2], [], []) is None
