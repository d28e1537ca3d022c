"""Patch.step_aside/step_back: a per-step hook taken out for a while and put back, never
over another hook made on top of it."""

from gpuwhy.tfapi.patching import Patch


class Owner:
    def method(self):
        return "original"


class Child(Owner):
    pass


def _wrap(original):
    return lambda self: "hooked " + original(self)


def test_a_hook_steps_aside_and_back_and_is_undone_as_before():
    patch = Patch(Owner, "method", _wrap)
    assert Owner().method() == "hooked original"
    assert patch.step_aside()
    assert Owner().method() == "original"
    patch.step_back()
    assert Owner().method() == "hooked original"
    patch.undo()
    assert Owner().method() == "original" and "method" in vars(Owner)


def test_an_inherited_method_steps_aside_to_the_inherited_one():
    patch = Patch(Child, "method", _wrap)
    assert patch.step_aside() and "method" not in vars(Child)
    assert Child().method() == "original"
    patch.step_back()
    assert Child().method() == "hooked original"
    patch.undo()
    assert "method" not in vars(Child)


def test_a_hook_made_over_it_is_never_stepped_over():
    ours = Patch(Owner, "method", _wrap)
    theirs = Patch(Owner, "method", _wrap)
    assert not ours.step_aside()  # theirs is on top: nothing changes
    assert Owner().method() == "hooked hooked original"
    theirs.undo()
    assert ours.step_aside()
    over = Patch(Owner, "method", _wrap)  # made while ours stepped aside
    ours.step_back()  # leaves it in place
    assert Owner().method() == "hooked original" and vars(Owner)["method"] is over.replacement
    over.undo()
    ours.undo()
