"""A short training loop whose torch.profiler export writes a truncated
trace (the script replaces export_chrome_trace before it trains): what a
full disk or a crashed exporter leaves. torchneck's GPU window must say in
one line that its trace could not be read, and the rest of the report
stand."""
import torch
import torch.profiler


def truncated(self, path):
    with open(path, "w") as f:
        f.write('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1')


torch.profiler.profile.export_chrome_trace = truncated
model = torch.nn.Linear(32, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(16, 32), torch.randn(16, 1)
for _ in range(20):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained")
