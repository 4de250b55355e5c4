"""The wrappers' one base: options travel through a wrapper to the optimizer inside."""

import threading

import chex
import jax
import jax.numpy as jnp
import optax
import pytest

import funcgrad as fg

PARAMS = {"W": jnp.array([1.0, 2.0]), "b": jnp.array([3.0])}


def _loss(p):
    return jnp.sum(p["W"] ** 2) + jnp.sum(p["b"])


WRAPPERS = [
    pytest.param(lambda opt: fg.train.LossScaleOptimizer(opt), id="loss_scale"),
    pytest.param(lambda opt: fg.train.MovingAverageOptimizer(opt, 0.5), id="moving_average"),
    pytest.param(lambda opt: fg.train.optimize_loss(None, opt, clip_gradients=1.0), id="train_op"),
    pytest.param(
        lambda opt: fg.train.optimize_loss(None, fg.train.LossScaleOptimizer(opt)), id="nested"
    ),
]


def _steps(opt, **call):
    state = opt.init(PARAMS)
    for _ in range(3):
        state, _ = opt.minimize(_loss, state, **call)
    return state


@pytest.mark.parametrize("wrap", WRAPPERS)
def test_a_calls_decay_var_list_travels_to_the_optimizer_inside(wrap) -> None:
    by_argument = _steps(wrap(fg.train.AdamWOptimizer(0.5, 0.1, decay_var_list=["b"])))
    wrapper = wrap(fg.train.AdamWOptimizer(0.5, 0.1))
    by_call = _steps(wrapper, decay_var_list=["b"])
    every = _steps(wrapper)  # the call left the wrapper (and the optimizer in it) as it was
    chex.assert_trees_all_close(by_call, by_argument)
    assert not jnp.allclose(every.params["W"], by_call.params["W"])  # W decayed without it


def test_a_group_step_refuses_a_members_option_and_the_member_takes_it() -> None:
    group = fg.train.OptimizerGroup(
        w=(fg.train.AdamWOptimizer(0.5, 0.1), ["W"]), b=(fg.train.AdamOptimizer(0.1), ["b"])
    )
    state = group.init(PARAMS)
    with pytest.raises(TypeError, match=r"decay_var_list= configures a member's optimizer, here "
                       r"'w' \(AdamWOptimizer\).*group\[name\]\.minimize"):  # fmt: skip
        group.minimize(_loss, state, decay_var_list=["W"])
    stepped, _ = group["w"].minimize(_loss, state, decay_var_list=["b"])  # decays nothing of W's
    alone, _ = group["w"].minimize(_loss, state)
    assert not jnp.allclose(stepped.params["W"], alone.params["W"])


def test_an_optimizer_that_decays_nothing_refuses_decay_var_list_from_any_loss() -> None:
    opt = fg.train.AdamOptimizer(0.1)
    state = opt.init(PARAMS)
    with pytest.raises(TypeError, match=r"decay_var_list= is not taken here: .*AdamWOptimizer"):
        opt.minimize(lambda p, **kwargs: _loss(p), state, decay_var_list=["W"])
    scaled = fg.train.LossScaleOptimizer(opt)
    with pytest.raises(TypeError, match="decay_var_list= is not taken here"):
        scaled.minimize(lambda p, **kwargs: _loss(p), scaled.init(PARAMS), decay_var_list=["W"])
    got = opt.minimize(lambda p, decay_var_list: _loss(p), state, decay_var_list=3)  # its own
    assert int(got[0].global_step) == 1


def test_threads_with_their_own_decay_var_list_decay_their_own_variables() -> None:
    opt = fg.train.AdamWOptimizer(0.5, 0.1)
    want = {n: _steps(opt, decay_var_list=[n]) for n in ("W", "b")}
    got = {}

    def run(name):
        for _ in range(5):
            got[name] = _steps(opt, decay_var_list=[name])

    threads = [threading.Thread(target=run, args=(n,)) for n in ("W", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ("W", "b"):
        chex.assert_trees_all_equal(got[name], want[name])


def test_tx_decays_the_variables_decay_var_list_names_in_a_plain_optax_loop() -> None:
    tx = fg.train.AdamWOptimizer(0.5, 0.1, decay_var_list=["W"]).tx
    grads = jax.tree.map(jnp.zeros_like, PARAMS)
    updates, _ = tx.update(grads, tx.init(PARAMS), PARAMS)
    new = optax.apply_updates(PARAMS, updates)
    chex.assert_trees_all_close(new["W"], PARAMS["W"] * 0.5)
    chex.assert_trees_all_close(new["b"], PARAMS["b"])


def test_compute_gradients_of_the_parameters_alone_around_a_loss_scale_says_the_fix() -> None:
    opt = fg.train.optimize_loss(None, fg.train.LossScaleOptimizer(fg.train.AdamOptimizer()))
    with pytest.raises(TypeError, match=r"loss scale is in the state; compute the gradients"):
        opt.compute_gradients(_loss, PARAMS)
