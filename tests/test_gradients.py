"""fg.gradients, value_and_gradients, stop_gradient, taps: against independent computations."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import funcgrad as fg

F32 = np.float32


def _mlp(params, x):
    h = jnp.tanh(x @ params["layers"][0]["w"] + params["layers"][0]["b"])
    return jnp.sum(jnp.sin(h @ params["layers"][1]["w"]) * params["scale"])


def _params():
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    return {
        "layers": [
            {"w": jax.random.normal(k1, (3, 4)), "b": jnp.zeros((1, 4))},
            {"w": jax.random.normal(k2, (4, 2))},
        ],
        "scale": jax.random.normal(k3, ()),
    }


class TestCallingConvention:
    def test_list_xs_gives_list(self):
        grads = fg.gradients(lambda a, b: a * b, [F32(2.0), F32(3.0)])
        assert isinstance(grads, list)
        np.testing.assert_allclose(grads, [3.0, 2.0])

    def test_tuple_xs_gives_list(self):
        grads = fg.gradients(lambda a, b: a * b, (F32(2.0), F32(3.0)))
        assert isinstance(grads, list)

    def test_single_array_gives_single_gradient(self):
        x = jnp.arange(3.0)
        g = fg.gradients(lambda x: jnp.sum(x**2), x)
        chex.assert_trees_all_close(g, 2 * x)

    def test_dict_and_nested_pytree_match_vjp(self):
        params, x = _params(), jnp.ones((5, 3))
        got = fg.gradients(_mlp, [params, x])
        _, vjp = jax.vjp(_mlp, params, x)
        chex.assert_trees_all_close(got, list(vjp(jnp.float32(1.0))), rtol=1e-6)

    def test_dict_xs_gives_dict(self):
        params = _params()
        got = fg.gradients(lambda p: _mlp(p, jnp.ones((2, 3))), params)
        chex.assert_trees_all_close(got, jax.grad(lambda p: _mlp(p, jnp.ones((2, 3))))(params))

    def test_finite_differences(self):
        def f(x, y):
            return fg.gradients(lambda x, y: jnp.sum(jnp.sin(x) * y**2), [x, y])

        x, y = jnp.array([0.3, -1.2]), jnp.array([1.5, 0.7])
        check_grads(lambda x, y: jnp.sum(jnp.sin(x) * y**2), (x, y), order=2, modes=["rev"])
        fx, fy = f(x, y)
        chex.assert_trees_all_close(fx, jnp.cos(x) * y**2, rtol=1e-6)
        chex.assert_trees_all_close(fy, 2 * jnp.sin(x) * y, rtol=1e-6)


class TestOutputsAndCotangents:
    def test_pytree_ys_sums_every_output(self):
        def f(a, b):
            return {"p": a * b, "q": [a + b, jnp.stack([a, 2.0 * b])]}

        got = fg.gradients(f, [F32(2.0), F32(3.0)])
        np.testing.assert_allclose(got, [3.0 + 1.0 + 1.0, 2.0 + 1.0 + 2.0])

    def test_grad_ys_weights_outputs(self):
        def f(a, b):
            return [a * b, a + b]

        got = fg.gradients(f, [F32(2.0), F32(3.0)], grad_ys=[F32(10.0), F32(-1.0)])
        _, vjp = jax.vjp(f, F32(2.0), F32(3.0))
        np.testing.assert_allclose(got, vjp([F32(10.0), F32(-1.0)]))

    def test_grad_ys_none_leaf_means_ones(self):
        def f(a):
            return {"x": 3.0 * a, "y": a * a}

        a = jnp.array([1.0, 2.0])
        got = fg.gradients(f, a, grad_ys={"x": None, "y": jnp.array([2.0, 0.5])})
        chex.assert_trees_all_close(got, 3.0 + jnp.array([2.0, 0.5]) * 2 * a)

    def test_python_scalar_grad_ys_takes_output_dtype(self):
        got = fg.gradients(lambda a: 2.0 * a, F32(1.0), grad_ys=3.0)
        assert got.dtype == jnp.float32 and float(got) == 6.0

    def test_integer_outputs_do_not_contribute(self):
        got = fg.gradients(lambda a: [a * 2.0, jnp.argmax(jnp.stack([a, -a]))], F32(1.0))
        assert float(got) == 2.0

    def test_has_aux(self):
        grads, aux = fg.gradients(lambda a: (a * a, {"sq": a * a}), F32(3.0), has_aux=True)
        assert float(grads) == 6.0 and float(aux["sq"]) == 9.0

    def test_value_and_gradients(self):
        ys, grads = fg.value_and_gradients(lambda a, b: [a * b, a], [F32(2.0), F32(5.0)])
        np.testing.assert_allclose(ys, [10.0, 2.0])
        np.testing.assert_allclose(grads, [6.0, 2.0])

    def test_value_and_gradients_has_aux(self):
        (ys, aux), grads = fg.value_and_gradients(
            lambda a: (a * a, "unused" == "x"), F32(3.0), has_aux=True
        )
        assert float(ys) == 9.0 and aux is False and float(grads) == 6.0


class TestUnconnected:
    def test_unused_argument_is_none_or_zero(self):
        assert fg.gradients(lambda a, b: 3.0 * a, [F32(1.0), F32(2.0)])[1] is None
        zero = fg.gradients(
            lambda a, b: 3.0 * a, [F32(1.0), jnp.ones((2, 3))], unconnected_gradients="zero"
        )[1]
        chex.assert_trees_all_equal(zero, jnp.zeros((2, 3)))

    def test_enum_is_accepted(self):
        got = fg.gradients(
            lambda a, b: a, [F32(1.0), F32(2.0)], unconnected_gradients=fg.UnconnectedGradients.ZERO
        )
        assert float(got[1]) == 0.0

    @pytest.mark.parametrize(
        "cut",
        [
            pytest.param(jax.lax.stop_gradient, id="stop_gradient"),
            pytest.param(jnp.floor, id="floor"),
            pytest.param(jnp.ceil, id="ceil"),
            pytest.param(jnp.round, id="round"),
            pytest.param(lambda x: x.astype(jnp.int32).astype(jnp.float32), id="int_cast"),
            pytest.param(lambda x: (x > 0).astype(jnp.float32), id="comparison"),
            pytest.param(lambda x: jnp.argmax(jnp.stack([x, -x])).astype(jnp.float32), id="argmax"),
        ],
    )
    def test_cuts_give_none(self, cut):
        assert fg.gradients(lambda x: 2.0 * cut(x), F32(1.5)) is None
        assert (
            float(fg.gradients(lambda x: 2.0 * cut(x), F32(1.5), unconnected_gradients="zero")) == 0
        )

    def test_sign_stays_connected_with_zero_gradient(self):
        assert float(fg.gradients(jnp.sign, F32(1.5))) == 0.0

    def test_integer_and_bool_leaves(self):
        xs = [F32(2.0), jnp.int32(3), jnp.array([True, False])]
        got = fg.gradients(lambda x, n, b: x * n.astype(jnp.float32), xs)
        assert float(got[0]) == 3.0 and got[1] is None and got[2] is None
        zeros = fg.gradients(lambda x, n, b: x, xs, unconnected_gradients="zero")
        assert zeros[1].dtype == jnp.int32 and zeros[2].dtype == jnp.bool_
        chex.assert_trees_all_equal(zeros[2], jnp.zeros(2, bool))

    def test_none_pattern_inside_pytree(self):
        got = fg.gradients(lambda p: p["used"] * 2.0, {"used": F32(1.0), "unused": F32(1.0)})
        assert got["unused"] is None and float(got["used"]) == 2.0

    def test_third_derivative_of_square_is_none(self):
        def d(f):
            return lambda x: fg.gradients(f, x)

        square = lambda x: x * x  # noqa: E731
        assert float(d(square)(F32(3.0))) == 6.0
        assert float(d(d(square))(F32(3.0))) == 2.0
        assert d(d(d(square)))(F32(3.0)) is None

    def test_straight_through_custom_jvp_is_connected(self):
        @jax.custom_jvp
        def round_ste(x):
            return jnp.round(x)

        round_ste.defjvp(lambda primals, tangents: (round_ste(primals[0]), tangents[0]))
        assert float(fg.gradients(lambda x: 3.0 * round_ste(x), F32(1.3))) == 3.0


class TestConstructs:
    """Connectivity through every construct the analysis follows, against jax.grad."""

    @pytest.mark.parametrize(
        "f",
        [
            pytest.param(lambda x: jax.jit(jnp.sin)(x) * x, id="jit"),
            pytest.param(lambda x: jax.nn.relu(x) * 3.0, id="custom_jvp"),
            pytest.param(lambda x: jax.checkpoint(jnp.cos)(x), id="remat"),
            pytest.param(
                lambda x: jax.lax.scan(lambda c, a: (c * a, c), x, jnp.full(3, 2.0))[0], id="scan"
            ),
            pytest.param(
                lambda x: jax.lax.cond(x > 0, lambda v: v * v, lambda v: -v, x), id="cond"
            ),
        ],
    )
    def test_connected_constructs_match_jax_grad(self, f):
        chex.assert_trees_all_close(fg.gradients(f, F32(0.7)), jax.grad(f)(F32(0.7)))

    def test_custom_vjp_is_connected(self):
        @jax.custom_vjp
        def f(x):
            return jnp.floor(x)

        f.defvjp(lambda x: (f(x), None), lambda _, g: (5.0 * g,))
        assert float(fg.gradients(f, F32(1.2))) == 5.0

    def test_scan_carry_fixed_point(self):
        # x reaches the output only after two iterations, through the carry.
        def f(x):
            def body(c, _):
                a, b = c
                return (b, x * 0.0 + a), None

            (a, _), _ = jax.lax.scan(body, (F32(1.0), F32(2.0)), None, length=3)
            return a

        assert fg.gradients(lambda x: f(x) + 0.0 * jax.lax.stop_gradient(x), F32(1.0)) is not None

    def test_scan_unconnected_carry(self):
        def f(x):
            c, _ = jax.lax.scan(lambda c, _: (c + 1.0, None), F32(0.0), None, length=3)
            return c + jax.lax.stop_gradient(x)

        assert fg.gradients(f, F32(1.0)) is None

    def test_cond_branch_cut(self):
        f = lambda x: jax.lax.cond(True, lambda v: jnp.round(v), lambda v: jnp.floor(v), x)  # noqa: E731
        assert fg.gradients(f, F32(1.2)) is None

    def test_while_loop_connectivity(self):
        def f(x):
            return jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 1.5), (0, x))[
                1
            ]

        def g(x):
            return jax.lax.while_loop(
                lambda c: c[0] < x, lambda c: (c[0] + 1.0, c[1] * 2.0), (F32(0.0), F32(1.0))
            )[1]

        # Reverse mode cannot differentiate a while_loop (a JAX limitation), but the
        # analysis still sees which inputs reach the output.
        with pytest.raises(ValueError, match="while_loop"):
            fg.gradients(f, F32(1.0))
        assert fg.gradients(g, F32(2.0)) is None


class TestTransformations:
    def test_same_values_and_none_pattern(self, variant):
        def grads(a, b, c):
            return fg.gradients(lambda a, b, c: a * jnp.floor(b) + jnp.sin(a), [a, b, c])

        got = variant(grads)(F32(0.5), F32(1.5), F32(2.0))
        assert got[1] is None and got[2] is None
        np.testing.assert_allclose(got[0], 1.0 + np.cos(0.5), rtol=1e-6)

    def test_vmap_gives_per_example_gradients(self):
        w = jnp.array([1.0, -2.0, 0.5])
        xs = jnp.arange(12.0).reshape(4, 3) / 10

        def loss(w, x):
            return jnp.tanh(x @ w) ** 2

        got = jax.vmap(lambda x: fg.gradients(lambda w: loss(w, x), w))(xs)
        expected = jnp.stack([jax.grad(loss)(w, x) for x in xs])
        chex.assert_trees_all_close(got, expected, rtol=1e-6)

    def test_jit_traces_once(self):
        @jax.jit
        @chex.assert_max_traces(n=1)
        def step(w):
            return fg.gradients(lambda w: jnp.sum(w**2), w)

        for i in range(3):
            chex.assert_trees_all_close(step(jnp.full(3, float(i))), jnp.full(3, 2.0 * i))

    def test_nested_closes_over_outer_value(self):
        def outer(a):
            return fg.gradients(lambda b: a * b * b, F32(3.0))

        assert float(fg.gradients(outer, F32(2.0))) == 6.0


class TestTaps:
    def test_tap_is_identity_outside(self):
        assert float(fg.tap(F32(2.0), "t")) == 2.0

    def test_tap_gradients_match_split_function(self):
        def f(w, x):
            h = fg.tap(jnp.tanh(x @ w), "h")
            return jnp.sum(h**3)

        w, x = jnp.ones((3, 2)) / 3, jnp.arange(6.0).reshape(2, 3) / 6
        got = fg.tap_gradients(f, [w, x], ["h"])
        h = jnp.tanh(x @ w)
        chex.assert_trees_all_close(got["h"], 3 * h**2, rtol=1e-6)

    def test_tap_gradients_with_grad_ys_and_single_name(self):
        got = fg.tap_gradients(lambda x: 2.0 * fg.tap(x * x, "s"), F32(3.0), "s", grad_ys=F32(5.0))
        assert float(got["s"]) == 10.0

    def test_unconnected_tap(self):
        def f(x):
            fg.tap(x * 2.0, "dead")
            return x

        assert fg.tap_gradients(f, F32(1.0), "dead") == {"dead": None}
        zero = fg.tap_gradients(f, F32(1.0), "dead", unconnected_gradients="zero")
        assert float(zero["dead"]) == 0.0

    @pytest.mark.parametrize("names", [None, 3, {"h"}], ids=["none", "int", "set"])
    def test_tap_gradients_names_that_are_no_names_say_what_to_pass(self, names):
        with pytest.raises(
            TypeError,
            match=r"fg\.tap_gradients\(f, xs, names\): names is .*, not a tap name or a list "
            r"of them; pass the names given to fg\.tap\(x, name\), e\.g\. names='h'",
        ):
            fg.tap_gradients(lambda x: fg.tap(x, "h") * 2.0, F32(1.0), names)

    def test_stop_gradients_none_is_tensorflows_default(self):
        def f(a):
            return fg.tap(2.0 * a, "b") + a

        assert float(fg.gradients(f, F32(0.0), stop_gradients=None)) == 3.0
        got = fg.tap_gradients(f, F32(0.0), "b", stop_gradients=None)
        assert float(got["b"]) == 1.0
        with pytest.raises(TypeError, match=r"stop_gradients is 7, not a tap name.*\['h'\]"):
            fg.gradients(f, F32(0.0), stop_gradients=7)

    def test_stop_gradients_partial_derivative(self):
        # TensorFlow's stop_gradients example: total derivative [3, 1], partial [1, 1].
        def f(a):
            b = fg.tap(2.0 * a, "b")
            return a + b

        assert float(fg.gradients(f, F32(0.0))) == 3.0
        assert float(fg.gradients(f, F32(0.0), stop_gradients=["b"])) == 1.0

    def test_stopped_tap_of_the_input_itself_gives_the_partial_derivative(self, variant):
        # tf.gradients(a * a + 2 * a, a, stop_gradients=[a]) is 8 at a = 3: the gradient
        # reaches a stopped tensor; when that tensor is the input, it is the input's.
        def f(x):
            a = fg.tap(x, "a")
            b = fg.tap(2.0 * a, "b")
            return a * a + b

        at = F32(3.0)
        assert float(variant(lambda x: fg.gradients(f, x, stop_gradients=["a"]))(at)) == 8.0
        assert float(variant(lambda x: fg.gradients(f, x, stop_gradients=["a", "b"]))(at)) == 6.0

    def test_tap_gradients_with_stop_gradients(self, variant):
        # TensorFlow's own doc example: tf.gradients(a + b, [a, b], stop_gradients=[a, b])
        # is [1, 1], where b = 2 * a; without stop_gradients it is [3, 1].
        def f(x):
            a = fg.tap(x, "a")
            b = fg.tap(2.0 * a, "b")
            return a + b

        stopped = variant(lambda x: fg.tap_gradients(f, x, ["a", "b"], stop_gradients=["a", "b"]))
        total = variant(lambda x: fg.tap_gradients(f, x, ["a", "b"]))
        assert jax.tree.map(float, stopped(F32(0.0))) == {"a": 1.0, "b": 1.0}
        assert jax.tree.map(float, total(F32(0.0))) == {"a": 3.0, "b": 1.0}
        with pytest.raises(KeyError, match=r"stop_gradients names \['c'\]"):
            fg.tap_gradients(f, F32(0.0), "a", stop_gradients=["c"])

    def test_taps_under_jit(self, variant):
        def f(x):
            return fg.tap(x * x, "sq") * 3.0

        got = variant(lambda x: fg.tap_gradients(f, x, "sq"))(F32(2.0))
        stopped = variant(lambda x: fg.gradients(f, x, stop_gradients="sq"))(F32(2.0))
        assert float(got["sq"]) == 3.0 and stopped is None

    def test_taps_under_vmap(self):
        f = lambda x: fg.tap(x * 2.0, "t") ** 2  # noqa: E731
        got = jax.vmap(lambda x: fg.tap_gradients(f, x, "t"))(jnp.arange(3.0))
        chex.assert_trees_all_close(got["t"], 4.0 * jnp.arange(3.0))

    def test_pytree_tap(self):
        def f(x):
            t = fg.tap({"a": x, "n": jnp.int32(1)}, "t")
            return t["a"] * 2.0

        got = fg.tap_gradients(f, F32(1.0), "t")
        assert float(got["t"]["a"]) == 2.0 and got["t"]["n"] is None


class TestBadInput:
    def test_grad_ys_wrong_shape_and_dtype_listed_together(self):
        f = lambda a: {"x": a, "y": 2.0 * a}  # noqa: E731
        bad = {"x": jnp.ones(3), "y": jnp.ones(2, jnp.int32)}
        with pytest.raises(ValueError, match=r"ys\['x'\].*shape \(2,\).*shape \(3,\)") as e:
            fg.gradients(f, jnp.ones(2), grad_ys=bad)
        assert "ys['y']" in str(e.value) and "int32" in str(e.value)

    def test_grad_ys_wrong_structure(self):
        with pytest.raises(ValueError, match="grad_ys has structure"):
            fg.gradients(lambda a: [a, a], F32(1.0), grad_ys=[F32(1.0)])

    def test_non_array_output(self):
        with pytest.raises(TypeError, match=r"ys\[1\] is a str.*must return an array"):
            fg.gradients(lambda a: [a, "loss"], F32(1.0))

    def test_non_array_input(self):
        with pytest.raises(TypeError, match=r"xs\[1\] is a str"):
            fg.gradients(lambda a, b: a, [F32(1.0), "b"])

    def test_has_aux_needs_pair(self):
        with pytest.raises(TypeError, match="pair"):
            fg.gradients(lambda a: a, F32(1.0), has_aux=True)

    def test_empty_xs(self):
        with pytest.raises(ValueError, match="xs is empty"):
            fg.gradients(lambda: 1.0, [])

    @pytest.mark.parametrize("gradients", [fg.gradients, fg.value_and_gradients])
    def test_tensorflows_graph_arguments_are_refused_with_the_reason(self, gradients):
        """TF1 code passes them to tf.gradients; they were a bare "unexpected keyword"."""
        with pytest.raises(
            TypeError,
            match=r"aggregation_method= is TensorFlow's argument and is not taken: it chooses "
            r"how TensorFlow adds gradients, and XLA adds them; gate_gradients= is "
            r"TensorFlow's argument .* XLA schedules the whole step; drop it: fg\.",
        ):
            gradients(lambda a: a, F32(1.0), aggregation_method=None, gate_gradients=True)
        with pytest.raises(TypeError, match=r"it takes no keyword argument 'grads_ys'; drop it"):
            gradients(lambda a: a, F32(1.0), grads_ys=F32(1.0))

    def test_bad_unconnected_gradients(self):
        with pytest.raises(ValueError, match=r"one of \['none', 'zero'\]"):
            fg.gradients(lambda a: a, F32(1.0), unconnected_gradients="zeros")

    def test_unknown_tap_name_lists_taps(self):
        f = lambda x: fg.tap(x, "hidden") * 2.0  # noqa: E731
        with pytest.raises(KeyError, match=r"\['hiden'\].*\['hidden'\]"):
            fg.tap_gradients(f, F32(1.0), ["hiden"])

    def test_stop_gradients_naming_no_tap(self):
        with pytest.raises(KeyError, match="stop_gradients names"):
            fg.gradients(lambda x: x * 2.0, F32(1.0), stop_gradients=["h"])

    def test_tap_name_used_twice(self):
        def f(x):
            return fg.tap(x, "t") + fg.tap(x * 2.0, "t")

        with pytest.raises(ValueError, match="'t' is used twice"):
            fg.gradients(f, F32(1.0))

    @pytest.mark.parametrize("name", [pytest.param("", id="empty"), pytest.param(3, id="int")])
    def test_bad_tap_name(self, name):
        with pytest.raises(TypeError, match="non-empty string"):
            fg.tap(F32(1.0), name)

    def test_stop_gradients_not_strings(self):
        with pytest.raises(TypeError, match="tap names"):
            fg.gradients(lambda x: x, F32(1.0), stop_gradients=[1])


def test_stop_gradient_pytree():
    tree = {"a": F32(1.0), "b": [F32(2.0), None]}
    got = fg.gradients(lambda t: fg.stop_gradient(t)["a"] + t["b"][0], tree)
    assert got["a"] is None and float(got["b"][0]) == 1.0


def test_inside_shard_map_default_cotangents_vary_like_outputs():
    mesh = jax.make_mesh((8,), ("data",))
    spec = jax.sharding.PartitionSpec("data")

    def per_device(w, x):
        # w is replicated (invariant), so JAX already sums its gradient over devices.
        return fg.value_and_gradients(lambda w: jnp.sum(w * x[0], keepdims=True), w)

    step = jax.jit(
        jax.shard_map(
            per_device,
            mesh=mesh,
            in_specs=(jax.sharding.PartitionSpec(), spec),
            out_specs=(spec, jax.sharding.PartitionSpec()),
        )
    )
    x = jax.device_put(jnp.arange(16.0).reshape(8, 2), jax.sharding.NamedSharding(mesh, spec))
    ys, grads = step(jnp.ones(2), x)
    chex.assert_trees_all_close(ys, jnp.sum(x, axis=1))
    chex.assert_trees_all_close(grads, jnp.sum(x, axis=0))
