"""Loop shape: a small framework-style Trainer drives the loop.

Trainer.fit() iterates the DataLoader itself and calls its own methods, as
Lightning-like frameworks do: training_step (forward + loss),
_backward, _optimizer_step (which calls optimizer.step() and zero_grad), and
callbacks (on_train_start, on_step_end, on_train_end; a LoggingCallback
prints every 10 steps). The user's script never calls optimizer.step()
itself: torchneck must still count one step per optimizer.step. Nothing else
is planted: equal Linear layers, a DataLoader (num_workers=0) whose reads
sleep a little (data ~10 %).

    /usr/bin/python3 trainer_class.py [--steps N] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  logged_steps       the steps the LoggingCallback printed at
  callback_calls     {hook name: calls}
per_step_s: step, data_wait, training_step, backward, optimizer_step, callbacks;
  forward (the model and the loss, inside training_step) and optimizer (step
  and zero_grad, inside optimizer_step) apart.
"""
import time

_T0 = time.perf_counter()

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

from looptruth import LoopClock, ReadBatches, mlp


class Callback:
    def on_train_start(self, trainer):
        pass

    def on_step_end(self, trainer, step, loss):
        pass

    def on_train_end(self, trainer):
        pass


class LoggingCallback(Callback):
    def __init__(self, every=10):
        self.every, self.logged = every, []

    def on_step_end(self, trainer, step, loss):
        if step % self.every == 0:
            self.logged.append(step)
            print(f"[trainer] step {step:3d}  loss {loss.item():.4f}  "
                  f"lr {trainer.optimizer.param_groups[0]['lr']:g}", flush=True)


class Trainer:
    def __init__(self, model, optimizer, loss_fn, callbacks=(), clock=None, max_steps=None):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.callbacks, self.clock, self.max_steps = list(callbacks), clock, max_steps
        self.global_step = 0
        self.callback_calls = {}

    def _call(self, hook, *args):
        self.callback_calls[hook] = self.callback_calls.get(hook, 0) + 1
        for cb in self.callbacks:
            getattr(cb, hook)(self, *args)

    def training_step(self, batch):
        x, y = batch
        with self.clock.timed("forward"):
            return self.loss_fn(self.model(x), y)

    def _backward(self, loss):
        loss.backward()

    def _optimizer_step(self):
        with self.clock.timed("optimizer"):
            self.optimizer.step()
        self.clock.boundary()  # the truth's step ends where optimizer.step returns
        with self.clock.timed("optimizer"):
            self.optimizer.zero_grad()

    def fit(self, loader):
        clock = self.clock
        self.model.train()
        self._call("on_train_start")
        it = iter(loader)
        clock.start()
        while self.max_steps is None or self.global_step < self.max_steps:
            try:
                batch = clock.next(it)
            except StopIteration:
                break
            with clock.timed("training_step"):
                loss = self.training_step(batch)
            with clock.timed("backward"):
                self._backward(loss)
            with clock.timed("optimizer_step"):
                self._optimizer_step()
            with clock.timed("callbacks"):
                self._call("on_step_end", self.global_step, loss)
            self.global_step += 1
        clock.stop()
        self._call("on_train_end")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--read-ms", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    model = mlp(a.width, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(ReadBatches(a.steps, a.batch, a.width, a.read_ms / 1000, a.seed),
                        batch_size=None, num_workers=0)
    log = LoggingCallback(10)
    clock = LoopClock("trainer_class", "a Trainer class calls optimizer.step() in its own method")
    trainer = Trainer(model, opt, nn.MSELoss(), [log], clock)
    trainer.fit(loader)
    gt = clock.write(a.truth, {"logged_steps": log.logged, "callback_calls": trainer.callback_calls})
    print(f"trainer_class: {gt['steps']} steps in {gt['loop_wall_s']:.2f} s, data "
          f"{100 * gt['shares']['data_wait']:.1f} %, script {time.perf_counter() - _T0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
