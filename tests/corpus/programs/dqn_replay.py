"""A deep Q-network's loop as the Keras DQN tutorials of the blogs write it: each action
picked with model.predict(state), each replayed sample a model.predict of its targets and
a model.fit of one batch and one epoch. Keras' loop around each one-batch call is most of
the run: both are named at their lines, with their one-batch forms."""
# expect: env.no-gpu high
# expect: steps.keras-call-per-step high -- model.predict() each step
# expect: steps.keras-call-per-step high|medium -- model.fit() of one batch each step: its share beside the predicts' follows the host's load
# expect: tensorcore.unused low

import random
from collections import deque

import numpy as np
import tensorflow as tf

state_size, action_size = 8, 4
model = tf.keras.Sequential(
    [
        tf.keras.Input((state_size,)),
        tf.keras.layers.Dense(24, activation="relu"),
        tf.keras.layers.Dense(24, activation="relu"),
        tf.keras.layers.Dense(action_size, activation="linear"),
    ]
)
model.compile(loss="mse", optimizer=tf.keras.optimizers.Adam(learning_rate=0.001))
memory = deque(maxlen=2000)
epsilon, gamma = 0.3, 0.95
random.seed(0)
rng = np.random.default_rng(0)


def act(state):
    if rng.random() <= epsilon:
        return random.randrange(action_size)
    act_values = model.predict(state, verbose=0)
    return int(np.argmax(act_values[0]))


def replay(batch_size):
    for state, action, reward, next_state, done in random.sample(memory, batch_size):
        target = reward
        if not done:
            target = reward + gamma * np.amax(model.predict(next_state, verbose=0)[0])
        target_f = model.predict(state, verbose=0)
        target_f[0][action] = target
        model.fit(state, target_f, epochs=1, verbose=0)


state = rng.random((1, state_size))
for t in range(36):
    action = act(state)
    next_state = rng.random((1, state_size))
    memory.append((state, action, float(rng.random()), next_state, t % 12 == 11))
    state = next_state
    if len(memory) > 4:
        replay(2)
print("done")
