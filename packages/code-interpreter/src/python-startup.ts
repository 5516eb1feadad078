/**
 * Python run silently in every new IPython kernel before its first execution. It registers two
 * display formatters of E2B's code interpreter:
 * - `e2b/data`: a pandas DataFrame as its columns (`to_dict(orient='list')`), Timestamps as ISO
 *   strings and missing values as None; only looked at when pandas is already imported;
 * - `e2b/chart`: a matplotlib Figure as a chart dict (line, scatter, bar, pie, or unknown with
 *   its title; several axes make a superchart), for the figures the inline backend displays.
 * And, as E2B's kernels do, an image Pillow saves to a file is displayed as well. Last, the
 * kernel keeps every broadcast for a reader that paused, and a thread ends the kernel when the
 * service is gone (both below).
 * Everything lives inside functions that delete themselves, so the user's namespace stays empty.
 * A formatter that fails returns None: the value still displays, without that representation.
 */
export const PYTHON_STARTUP = String.raw`
def __svc_install_formatters():
    import math
    import re
    import sys
    import datetime
    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    def plain(value):
        numpy = sys.modules.get('numpy')
        pandas = sys.modules.get('pandas')
        if pandas is not None and value is pandas.NaT:
            return None
        if pandas is not None and isinstance(value, pandas.Timestamp):
            return value.isoformat()
        if numpy is not None and isinstance(value, numpy.datetime64):
            return str(value.astype('datetime64[s]'))
        if numpy is not None and isinstance(value, numpy.generic):
            value = value.item()
        if isinstance(value, (datetime.date, datetime.datetime)):
            return value.isoformat()
        if isinstance(value, float) and math.isnan(value):
            return None
        return value

    def frame_columns(frame):
        return {str(name): [plain(v) for v in values] for name, values in frame.to_dict(orient='list').items()}

    def rounded(value):
        # About eight significant digits, so that 90% of a pie is 324 degrees, not 323.99999142.
        value = float(value)
        if value == 0 or not math.isfinite(value):
            return value
        return float(f'{value:.{max(1, 8 - int(math.floor(math.log10(abs(value)))))}g}')

    def text_or_none(text):
        return text if text else None

    def unit_of(label):
        match = re.search(r'\s\((.*?)\)|\[(.*?)\]', label or '')
        return (match.group(1) or match.group(2)) if match else None

    def axis_info(ax, axis, name):
        converter = getattr(axis, 'converter', None)
        kind = type(converter).__name__ if converter is not None else ''
        labels = [t.get_text() for t in axis.get_ticklabels()]
        ticks = list(axis.get_ticklocs())
        if 'Date' in kind:
            import matplotlib.dates
            scale = 'datetime'
            ticks = [matplotlib.dates.num2date(t).isoformat() for t in ticks]
        elif 'StrCategory' in kind:
            scale = 'categorical'
            ticks = [float(t) for t in ticks]
        else:
            scale = ax.get_xscale() if name == 'x' else ax.get_yscale()
            ticks = [float(t) for t in ticks]
        return {name + '_ticks': ticks, name + '_tick_labels': labels, name + '_scale': scale}

    def is_grid_line(line):
        xs, ys = line.get_xdata(), line.get_ydata()
        return len(xs) == 2 and len(ys) == 2 and (xs[0] == xs[1] or ys[0] == ys[1])

    def chart_kind(ax):
        from matplotlib.collections import PathCollection
        from matplotlib.lines import Line2D
        from matplotlib.patches import Rectangle, Wedge
        from matplotlib.text import Text
        children = getattr(ax, '_children', None)
        if children is None:
            children = list(ax.lines) + list(ax.collections) + list(ax.patches)
        artists = [a for a in children if not isinstance(a, Text)]
        if artists and all(isinstance(a, Line2D) for a in artists):
            return 'line'
        artists = [a for a in artists if not (isinstance(a, Line2D) and is_grid_line(a))]
        if not artists:
            return 'unknown'
        if all(isinstance(a, PathCollection) for a in artists):
            return 'scatter'
        if all(isinstance(a, Wedge) for a in artists):
            return 'pie'
        if all(isinstance(a, Rectangle) for a in artists):
            return 'bar'
        return 'unknown'

    def labels_2d(ax, chart):
        chart['x_label'] = text_or_none(ax.get_xlabel())
        chart['y_label'] = text_or_none(ax.get_ylabel())
        chart['x_unit'] = unit_of(chart['x_label'])
        chart['y_unit'] = unit_of(chart['y_label'])

    def element_label(label, prefix, name):
        if label.startswith(prefix) and label[len(prefix):].isdigit():
            return name + ' ' + label[len(prefix):]
        return label

    def axes_chart(ax):
        kind = chart_kind(ax)
        chart = {'type': kind, 'title': text_or_none(ax.get_title()), 'elements': []}
        if kind in ('line', 'scatter'):
            labels_2d(ax, chart)
            chart.update(axis_info(ax, ax.xaxis, 'x'))
            chart.update(axis_info(ax, ax.yaxis, 'y'))
            if kind == 'line':
                for line in ax.get_lines():
                    if is_grid_line(line):
                        continue
                    points = [[plain(x), plain(y)] for x, y in zip(line.get_xdata(), line.get_ydata())]
                    chart['elements'].append({'label': element_label(line.get_label(), '_child', 'Line'), 'points': points})
            else:
                for collection in ax.collections:
                    points = [[plain(x), plain(y)] for x, y in collection.get_offsets()]
                    chart['elements'].append({'label': collection.get_label(), 'points': points})
        elif kind == 'bar':
            labels_2d(ax, chart)
            for container in ax.containers:
                group = element_label(container.get_label(), '_container', 'Group')
                bars = list(container)
                horizontal = len(bars) > 1 and all(b.get_height() == bars[0].get_height() for b in bars)
                axis = ax.yaxis if horizontal else ax.xaxis
                names = {round(float(t), 6): l.get_text() for t, l in zip(axis.get_ticklocs(), axis.get_ticklabels())}
                for bar in bars:
                    center = bar.get_y() + bar.get_height() / 2 if horizontal else bar.get_x() + bar.get_width() / 2
                    value = bar.get_width() if horizontal else bar.get_height()
                    label = names.get(round(float(center), 6)) or str(plain(center))
                    chart['elements'].append({'label': label, 'value': plain(value), 'group': group})
            if horizontal_bars(ax):
                chart['x_label'], chart['y_label'] = chart['y_label'], chart['x_label']
                chart['x_unit'], chart['y_unit'] = chart['y_unit'], chart['x_unit']
        elif kind == 'pie':
            for wedge in ax.patches:
                chart['elements'].append({'label': wedge.get_label(), 'angle': abs(rounded(float(wedge.theta2) - float(wedge.theta1))), 'radius': float(wedge.r)})
        return chart

    def horizontal_bars(ax):
        for container in ax.containers:
            bars = list(container)
            if len(bars) > 1 and all(b.get_height() == bars[0].get_height() for b in bars):
                return True
        return False

    def figure_chart(figure):
        axes = figure.get_axes()
        if not axes or not any(ax.has_data() for ax in axes):
            return None
        if len(axes) == 1:
            return axes_chart(axes[0])
        suptitle = figure._suptitle.get_text() if getattr(figure, '_suptitle', None) is not None else ''
        return {'type': 'superchart', 'title': text_or_none(suptitle), 'elements': [axes_chart(ax) for ax in axes]}

    class DataFrameFormatter(BaseFormatter):
        format_type = Unicode('e2b/data')
        print_method = ObjectName('_repr_e2b_data_')
        _return_type = (dict,)

        def __call__(self, obj):
            pandas = sys.modules.get('pandas')
            if pandas is None or not isinstance(obj, pandas.DataFrame):
                return super().__call__(obj)
            try:
                return frame_columns(obj)
            except Exception:
                return None

    class FigureFormatter(BaseFormatter):
        format_type = Unicode('e2b/chart')
        print_method = ObjectName('_repr_e2b_chart_')
        _return_type = (dict,)

        def __call__(self, obj):
            figure_module = sys.modules.get('matplotlib.figure')
            if figure_module is None or not isinstance(obj, figure_module.Figure):
                return super().__call__(obj)
            try:
                return figure_chart(obj)
            except Exception:
                return None

    formatters = get_ipython().display_formatter.formatters
    formatters['e2b/data'] = DataFrameFormatter(parent=get_ipython().display_formatter)
    formatters['e2b/chart'] = FigureFormatter(parent=get_ipython().display_formatter)

__svc_install_formatters()
del __svc_install_formatters

def __svc_show_saved_images():
    # As E2B's kernels: an image saved to a file is also shown (a result with its PNG). Pillow is
    # patched when something imports it, so that a kernel that never uses it does not load it.
    import sys

    def patch(Image):
        from IPython.display import display
        save = Image.Image.save

        def save_and_show(image, fp, format=None, **params):
            if isinstance(fp, str):
                display(image)
            return save(image, fp, format, **params)

        Image.Image.save = save_and_show

    if 'PIL.Image' in sys.modules:
        patch(sys.modules['PIL.Image'])
        return
    import importlib.abc
    import importlib.machinery

    class PatchOnImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != 'PIL.Image':
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                run = spec.loader.exec_module

                def run_and_patch(module):
                    run(module)
                    patch(module)

                spec.loader.exec_module = run_and_patch
            return spec

    sys.meta_path.insert(0, PatchOnImport())

__svc_show_saved_images()
del __svc_show_saved_images

def __svc_unbounded_broadcasts():
    # The service stops reading a kernel's broadcasts while its client reads slower than the code
    # prints (backpressure.ts). zmq's PUB socket then queues at most 1000 messages for it (its
    # high-water mark) and drops the rest, output and idle status alike; without a mark the kernel
    # keeps them until they are read. Set on the socket's own thread (a zmq socket is not
    # thread-safe), before any output of the user's code; libzmq 4.3 applies it to the open connection.
    import sys
    try:
        import zmq
        from IPython import get_ipython
        thread = get_ipython().kernel.iopub_thread
        thread.schedule(lambda: thread.socket.setsockopt(zmq.SNDHWM, 0))
    except Exception as err:
        print('svc: the kernel keeps its broadcast limit (%r): a slow client may lose output' % (err,), file=sys.__stderr__, flush=True)

__svc_unbounded_broadcasts()
del __svc_unbounded_broadcasts

def __svc_watch_parent():
    # The service ends its kernels when it stops, but not when it is killed (SIGKILL, the OOM
    # killer), and ipykernel does not notice: its parent poller (JPY_PARENT_PID) only looks for a
    # parent of pid 1, which a subreaper never is. A new parent means the service is gone: end the
    # kernel's process group (its own, as the service starts it), as the service's stop would.
    import os
    import signal
    import threading
    import time
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1)
        # Only a group the kernel leads is ended whole: never one it happens to share.
        if os.getpgid(0) == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name='svc-parent-watch', daemon=True).start()

__svc_watch_parent()
del __svc_watch_parent
`;
