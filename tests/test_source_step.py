"""The statements of an eager loop's body that issue the step's ops, lifted into a
function (source_step.py): parameters, returns and the call, read from real sources."""

from __future__ import annotations

import ast
import textwrap

from gpuwhy.source_step import lifted_step


def lift(source: str, op_lines, loop_index: int = -1):
    source = textwrap.dedent(source).lstrip("\n")
    tree = ast.parse(source)
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))]
    loop = sorted(loops, key=lambda n: n.lineno)[loop_index]
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    scope = next((f for f in scopes if f.lineno < loop.lineno <= f.end_lineno), tree)
    return lifted_step(source.splitlines(), scope, loop, op_lines)


ACCUMULATED = """
for epoch in range(4):
    total = 0.0
    for i in range(0, len(X), 32):
        xb, yb = X[i:i + 32], Y[i:i + 32]
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((tf.matmul(xb, W) - yb) ** 2)
        grads = tape.gradient(loss, [W])
        opt.apply_gradients(zip(grads, [W]))
        total += float(loss)
    print(epoch, total)
"""


def test_a_loss_summed_in_python_stays_in_the_loop_and_the_step_returns_it():
    step = lift(ACCUMULATED, {6: 10, 7: 20, 8: 5})
    assert (step.first, step.last) == (5, 8)
    assert step.signature == "def train_step(xb, yb):"  # X, W, opt: read where they are
    assert step.call == "loss = train_step(xb, yb)"
    assert step.body == (
        "with tf.GradientTape() as tape:",
        "    loss = tf.reduce_mean((tf.matmul(xb, W) - yb) ** 2)",
        "grads = tape.gradient(loss, [W])",
        "opt.apply_gradients(zip(grads, [W]))",
        "return loss",
    )


def test_a_value_carried_from_one_pass_to_the_next_is_taken_and_returned():
    source = """
    def train(dataset):
        hidden = tf.zeros((8, 16))
        for step, x in enumerate(dataset):
            hidden = tf.tanh(tf.matmul(x, W) + hidden)
            loss = tf.reduce_sum(hidden)
            if step % 100 == 0:
                print(step, float(loss))
        return hidden
    """
    step = lift(source, {4: 3, 5: 1})
    assert step.signature == "def train_step(x, hidden):"
    assert step.call == "hidden, loss = train_step(x, hidden)"
    assert step.body[-1] == "return hidden, loss"


def test_names_used_only_inside_stay_inside_and_a_comprehension_s_own_are_its_own():
    source = """
    for x in dataset:
        with tf.GradientTape() as tape:
            loss = model(x)
        grads = [g * 0.5 for g in tape.gradient(loss, model.trainable_variables)]
        opt.apply_gradients(zip(grads, model.trainable_variables))
    g = None
    """
    step = lift(source, {3: 5, 4: 10, 5: 8})
    assert step.call == "train_step(x)"  # tape, loss, grads: read nowhere else
    assert step.body[-1] == "opt.apply_gradients(zip(grads, model.trainable_variables))"


def test_statements_that_jump_or_hold_no_op_are_not_lifted():
    jumps = """
    for x in dataset:
        loss = step(x)
        if loss < 0.1:
            break
        log.append(float(loss))
    print(log)
    """
    assert lift(jumps, {2: 5, 3: 1, 4: 1}) is None
    assert lift(jumps, {99: 1}) is None
    long_body = "for x in ds:\n" + "".join(f"    y{i} = tf.abs(x)\n" for i in range(20))
    assert lift(long_body, dict.fromkeys(range(2, 22), 1)) is None


def test_python_reading_a_tensor_between_op_lines_ends_the_statements_lifted():
    """``epoch_loss += loss.numpy()`` cannot run in a graph: the step is the tape, the
    gradients and apply_gradients; the per-step accuracy after it stays eager, and
    the step returns the logits it reads."""
    source = """
    for epoch in range(5):
        epoch_loss = 0.0
        for step, (xb, yb) in enumerate(dataset):
            with tf.GradientTape() as tape:
                logits = model(xb, training=True)
                loss = loss_fn(yb, logits)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            epoch_loss += loss.numpy()
            correct += int(tf.reduce_sum(tf.cast(tf.argmax(logits, 1) == yb, tf.int32)))
    """
    step = lift(source, {5: 12, 6: 4, 7: 20, 8: 9, 10: 4})
    assert (step.first, step.last) == (4, 8)
    assert step.call == "logits, loss = train_step(xb, yb)"


def test_a_name_read_inside_a_lambda_is_a_parameter():
    """``opt.minimize(lambda: ...)`` reads the batch when it runs: the batch must be
    passed in, not read from the enclosing scope (a traced function would keep the
    first batch's value)."""
    source = """
    for xb, yb in batches:
        opt.minimize(lambda: tf.reduce_mean((model(xb) - yb) ** 2), model.trainable_variables)
        seen += 1
    """
    step = lift(source, {2: 30})
    assert step.signature == "def train_step(xb, yb):" and step.call == "train_step(xb, yb)"


def test_a_while_loop_reading_its_iterator_by_hand_has_its_step_lifted():
    source = """
    it = iter(dataset)
    step = 0
    while step < 1000:
        x, y = next(it)
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        step += 1
        if step % 100 == 0:
            print(step, float(loss))
    """
    step = lift(source, {4: 1, 5: 20, 6: 10, 7: 12})
    # next(it) issues an op: it goes in too, the iterator read where it is (a traced
    # function advances a captured iterator on each call)
    assert (step.first, step.last) == (4, 7)
    assert step.signature == "def train_step():" and step.call == "loss = train_step()"


def test_python_reading_a_value_between_the_gradients_and_their_application_ends_the_run():
    """``losses.append(loss.numpy())`` and ``float(tf.linalg.global_norm(grads))`` (ops,
    but read into Python) between the tape and apply_gradients: the tape and the
    gradients move, returned; the rest stays eager."""
    source = """
    for i in range(0, N, BATCH):
        xb, yb = tf.constant(X[i:i + 32]), tf.constant(Y[i:i + 32])
        with tf.GradientTape() as tape:
            loss = compute_loss(model, xb, yb)
        grads = tape.gradient(loss, model.trainable_variables)
        losses.append(loss.numpy())
        norms.append(float(tf.linalg.global_norm(grads)))
        opt.apply_gradients(zip(grads, model.trainable_variables))
    """
    step = lift(source, {4: 60, 5: 40, 7: 3, 8: 12})
    assert (step.first, step.last) == (3, 5)
    assert step.call == "loss, grads = train_step(xb, yb)"


def test_the_tape_moves_in_with_its_gradients_where_its_block_counted_no_op():
    """The ops counted at ``tape.gradient`` and ``apply_gradients`` only (the forward
    pass's ops issued in a function of its own, elsewhere in the file): lifted without
    their ``with tf.GradientTape() as tape:`` block, the step took the tape from outside,
    which recorded nothing inside it, and TF raised "No gradients provided for any
    variable". The block moves in with them."""
    source = """
    for epoch in range(4):
        for i in range(0, 2000, BATCH):
            xb, yb = X[i:i + BATCH], Y[i:i + BATCH]
            with tf.GradientTape() as tape:
                pred = forward(xb)
                loss = tf.reduce_mean(tf.square(pred - yb))
            grads = tape.gradient(loss, params)
            opt.apply_gradients(zip(grads, params))
            losses.append(loss.numpy())
    """
    step = lift(source, {7: 30, 8: 20})
    assert (step.first, step.last) == (4, 8)
    assert step.signature == "def train_step(xb, yb):"
    assert step.call == "loss = train_step(xb, yb)"
    assert step.body[0] == "with tf.GradientTape() as tape:"


def test_a_tape_block_that_reads_a_value_leaves_the_step_eager():
    source = """
    for i in range(0, N, BATCH):
        xb, yb = X[i:i + BATCH], Y[i:i + BATCH]
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(xb) - yb))
            seen.append(float(loss))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
    """
    assert lift(source, {6: 30, 7: 20}) is None


COMMENTED = """
for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
    # Open a GradientTape to record the operations run
    # during the forward pass, which enables auto-differentiation.
    with tf.GradientTape() as tape:
        # Run the forward pass of the layer.
        # The operations that the layer applies
        # to its inputs are going to be recorded
        # on the GradientTape.
        logits = model(x_batch_train, training=True)  # Logits for this minibatch

        # Compute the loss value for this minibatch.
        loss_value = loss_fn(y_batch_train, logits)

    # Use the gradient tape to automatically retrieve
    # the gradients of the trainable variables with respect to the loss.
    grads = tape.gradient(loss_value, model.trainable_weights)

    # Run one step of gradient descent by updating
    # the value of the variables to minimize the loss.
    optimizer.apply(grads, model.trainable_weights)

    # Log every 100 batches.
    if step % 100 == 0:
        print(f"Training loss (for 1 batch) at step {step}: {float(loss_value):.4f}")
"""


def test_a_step_commented_line_by_line_is_counted_by_its_code_not_its_comments():
    """keras-io's guide to a training loop from scratch: five statements over seventeen
    lines with their comments, which read as too long to lift: only the update was."""
    step = lift(COMMENTED, {9: 40, 16: 60, 20: 180})
    assert step is not None and (step.first, step.last) == (4, 20)
    assert step.signature == "def train_step(x_batch_train, y_batch_train):"
    assert step.call == "loss_value = train_step(x_batch_train, y_batch_train)"


def test_a_name_bound_anew_by_a_later_loop_is_not_returned():
    """The guide's second loop binds its own tape, logits and grads before reading them:
    the first loop's step returned its GradientTape (a TypeError in tf.function)."""
    second = (
        "for x_batch_train, y_batch_train in train_dataset:\n"
        "    with tf.GradientTape() as tape:\n"
        "        logits = model(x_batch_train, training=True)\n"
        "        loss_value = loss_fn(y_batch_train, logits)\n"
        "    grads = tape.gradient(loss_value, model.trainable_weights)\n"
        "    optimizer.apply(grads, model.trainable_weights)\n"
        "    train_acc_metric.update_state(y_batch_train, logits)\n"
        "print(float(loss_value))\n"
    )
    step = lift(COMMENTED + second, {9: 40, 16: 60, 20: 180}, loop_index=0)
    assert step is not None and step.returns == ("loss_value",)
    assert step.call == "loss_value = train_step(x_batch_train, y_batch_train)"
