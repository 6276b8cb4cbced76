from .cli import app

if __name__ == "__main__":  # not when a worker process of --cluster local starts (spawn imports __main__)
    app(prog_name="logscope")
